#include "grammar/json_schema.h"

#include <map>
#include <set>

namespace hypic::grammar {

using Json = nlohmann::ordered_json;
using Expr = Builder::Expr;

namespace {

constexpr int kMaxArrayBound = 64;
constexpr int kMaxDigits = 16;  // of an integer, and of a number's fraction

// Builds JSON rules into one Builder; the shared pieces (whitespace, strings, any value) are
// made once.
class JsonRules {
 public:
  explicit JsonRules(Builder* b) : b_(*b) {}

  Expr ws() {
    if (!ws_) ws_ = b_.opt(b_.byte(' '));
    return *ws_;
  }
  Expr string() {
    if (string_) return *string_;
    // Characters: printable ASCII but '"' and '\\', well-formed UTF-8 (strict parsers
    // refuse anything else), and escapes; \u escapes of UTF-16 surrogates (D800-DFFF) are
    // left out, so that no lone surrogate can be written (non-BMP characters come as UTF-8).
    ByteSet plain;
    for (int c = 0x20; c < 0x80; ++c) plain.set(size_t(c));
    plain.reset('"');
    plain.reset('\\');
    ByteSet esc;
    for (char c : std::string_view("\"\\/bfnrt")) esc.set(uint8_t(c));
    auto set_of = [&](std::string_view chars) {
      ByteSet s;
      for (char c : chars) s.set(uint8_t(c));
      return b_.bytes(s);
    };
    const Expr h = set_of("0123456789abcdefABCDEF");
    const Expr u4 = b_.alt({b_.seq({set_of("0123456789abcefABCEF"), h, h, h}), b_.seq({set_of("dD"), b_.range('0', '7'), h, h})});
    const Expr cont = b_.range(0x80, 0xBF);
    const Expr utf8 = b_.alt({b_.seq({b_.range(0xC2, 0xDF), cont}),
                              b_.seq({b_.byte(0xE0), b_.range(0xA0, 0xBF), cont}),
                              b_.seq({b_.range(0xE1, 0xEC), cont, cont}),
                              b_.seq({b_.byte(0xED), b_.range(0x80, 0x9F), cont}),
                              b_.seq({b_.range(0xEE, 0xEF), cont, cont}),
                              b_.seq({b_.byte(0xF0), b_.range(0x90, 0xBF), cont, cont}),
                              b_.seq({b_.range(0xF1, 0xF3), cont, cont, cont}),
                              b_.seq({b_.byte(0xF4), b_.range(0x80, 0x8F), cont, cont})});
    const Expr ch = b_.alt({b_.bytes(plain), utf8, b_.seq({b_.byte('\\'), b_.alt({b_.bytes(esc), b_.seq({b_.byte('u'), u4})})})});
    string_ = b_.seq({b_.byte('"'), b_.star(ch), b_.byte('"')});
    return *string_;
  }
  // e written 0..n times (nested options).
  Expr upto(Expr e, int n) {
    Expr r = b_.epsilon();
    for (int i = 0; i < n; ++i) r = b_.opt(b_.seq({e, r}));
    return r;
  }
  // Integers of at most kMaxDigits digits and fractions of at most kMaxDigits: a value ends
  // (a model that repeats a digit cannot run on to max_tokens), and every integer written is
  // exact in an int64.
  Expr integer() {
    if (!integer_)
      integer_ = b_.seq({b_.opt(b_.byte('-')),
                         b_.alt({b_.byte('0'), b_.seq({b_.range('1', '9'), upto(b_.range('0', '9'), kMaxDigits - 1)})})});
    return *integer_;
  }
  Expr number() {
    if (number_) return *number_;
    ByteSet e, sign;
    e.set('e');
    e.set('E');
    sign.set('+');
    sign.set('-');
    const Expr digit = b_.range('0', '9');
    // Exponents of at most two digits: every number stays within a double's range.
    number_ = b_.seq({integer(), b_.opt(b_.seq({b_.byte('.'), digit, upto(digit, kMaxDigits - 1)})),
                      b_.opt(b_.seq({b_.bytes(e), b_.opt(b_.bytes(sign)), digit, b_.opt(digit)}))});
    return *number_;
  }
  // "{" members "}" / "[" items "]" with `inner` (may be epsilon) between.
  Expr braces(char open, Expr inner, char close) { return b_.seq({b_.byte(uint8_t(open)), ws(), inner, ws(), b_.byte(uint8_t(close))}); }
  // x ("," x)* or nothing.
  Expr list(Expr x) { return b_.opt(b_.seq({x, b_.star(b_.seq({b_.byte(','), ws(), x}))})); }
  Expr member(Expr key, Expr value) { return b_.seq({key, b_.byte(':'), ws(), value}); }
  Expr object_of(Expr value) { return braces('{', list(member(string(), value)), '}'); }
  Expr any_value() {
    if (value_) return *value_;
    const Expr v = b_.declare();
    value_ = v;
    b_.define(v, {{object_of(v)}, {braces('[', list(v), ']')}, {string()}, {number()},
                  {b_.literal("true")}, {b_.literal("false")}, {b_.literal("null")}});
    return v;
  }
  Expr any_object() { return object_of(any_value()); }
  // The JSON text of v (a string: quoted and escaped).
  Expr literal(const Json& v) { return b_.literal(v.dump()); }

  Builder& b() { return b_; }

 private:
  Builder& b_;
  std::optional<Expr> ws_, string_, integer_, number_, value_;
};

bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                                     "$comment", "deprecated", "readOnly", "writeOnly", "strict"};
  return kAnnotations.count(k) > 0;
}

class SchemaCompiler {
 public:
  SchemaCompiler(Builder* b, const Json& root) : r_(b), b_(*b), root_(root) {}

  Result<Expr> compile(const Json& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth)
      return invalid_argument("the schema nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels at " + shown(path));
    if (++nodes_ > kMaxSchemaRules / 16) return invalid_argument("the schema is too large (more than " + std::to_string(kMaxSchemaRules / 16) + " subschemas)");
    if (s.is_boolean()) {
      if (s.get<bool>()) return r_.any_value();
      return invalid_argument("the schema at " + shown(path) + " is false: no value matches it");
    }
    if (!s.is_object()) return invalid_argument("the schema at " + shown(path) + " must be an object");
    for (const auto& [k, v] : s.items()) {
      static const std::set<std::string> kKnown = {"type", "properties", "required", "additionalProperties", "items",
                                                   "minItems", "maxItems", "enum", "const", "anyOf", "nullable",
                                                   "$ref", "$defs", "definitions"};
      if (!kKnown.count(k) && !is_annotation(k))
        return invalid_argument("'" + k + "' at " + shown(path) +
                                " is outside the supported JSON-schema subset (type, properties, required, additionalProperties, "
                                "items, minItems, maxItems, enum, const, anyOf, nullable, $ref to $defs); remove it");
    }
    Result<Expr> e = compile_inner(s, path, depth);
    if (!e) return e;
    if (auto n = s.find("nullable"); n != s.end()) {
      if (!n->is_boolean()) return invalid_argument("'nullable' at " + shown(path) + " must be a boolean");
      if (n->get<bool>()) return b_.alt({*e, b_.literal("null")});
    }
    return e;
  }

 private:
  static std::string shown(const std::string& path) { return path.empty() ? "the schema's root" : "'" + path + "'"; }
  static std::string join(const std::string& path, const std::string& k) { return path.empty() ? k : path + "." + k; }

  Result<Expr> compile_inner(const Json& s, const std::string& path, int depth) {
    if (auto ref = s.find("$ref"); ref != s.end()) return reference(*ref, path, depth);
    if (auto c = s.find("const"); c != s.end()) return r_.literal(*c);
    if (auto en = s.find("enum"); en != s.end()) {
      if (!en->is_array() || en->empty()) return invalid_argument("'enum' at " + shown(path) + " must be a non-empty array");
      if (en->size() > kMaxEnumValues)
        return invalid_argument("'enum' at " + shown(path) + " has " + std::to_string(en->size()) + " values; at most " +
                                std::to_string(kMaxEnumValues) + " are supported");
      std::vector<Expr> opts;
      for (const Json& v : *en) opts.push_back(r_.literal(v));
      return b_.alt(opts);
    }
    if (auto any = s.find("anyOf"); any != s.end()) {
      if (!any->is_array() || any->empty()) return invalid_argument("'anyOf' at " + shown(path) + " must be a non-empty array");
      std::vector<Expr> opts;
      for (size_t i = 0; i < any->size(); ++i) {
        Result<Expr> e = compile((*any)[i], join(path, "anyOf[" + std::to_string(i) + "]"), depth + 1);
        if (!e) return e;
        opts.push_back(*e);
      }
      return b_.alt(opts);
    }
    auto t = s.find("type");
    if (t == s.end()) {
      if (s.contains("properties") || s.contains("additionalProperties")) return object(s, path, depth);
      if (s.contains("items")) return array(s, path, depth);
      return r_.any_value();
    }
    std::vector<std::string> types;
    if (t->is_string()) {
      types.push_back(t->get<std::string>());
    } else if (t->is_array() && !t->empty()) {
      for (const Json& x : *t) {
        if (!x.is_string()) return invalid_argument("'type' at " + shown(path) + " must be a string or a list of strings");
        types.push_back(x.get<std::string>());
      }
    } else {
      return invalid_argument("'type' at " + shown(path) + " must be a string or a non-empty list of strings");
    }
    std::vector<Expr> opts;
    for (const std::string& ty : types) {
      Result<Expr> e = typed(ty, s, path, depth);
      if (!e) return e;
      opts.push_back(*e);
    }
    return b_.alt(opts);
  }

  Result<Expr> typed(const std::string& ty, const Json& s, const std::string& path, int depth) {
    if (ty == "object") return object(s, path, depth);
    if (ty == "array") return array(s, path, depth);
    if (ty == "string") return r_.string();
    if (ty == "number") return r_.number();
    if (ty == "integer") return r_.integer();
    if (ty == "boolean") return b_.alt({b_.literal("true"), b_.literal("false")});
    if (ty == "null") return b_.literal("null");
    return invalid_argument("'type' at " + shown(path) + " is '" + ty +
                            "'; the types are object, array, string, number, integer, boolean and null");
  }

  // Members and items follow a '{' or '[': a reference inside one is no longer direct.
  struct Consumed {
    explicit Consumed(std::vector<std::string>* d) : d_(d), saved_(std::move(*d)) { d->clear(); }
    ~Consumed() { *d_ = std::move(saved_); }
    std::vector<std::string>* d_;
    std::vector<std::string> saved_;
  };

  Result<Expr> object(const Json& s, const std::string& path, int depth) {
    const Consumed consumed(&direct_);
    const Json* props = nullptr;
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) return invalid_argument("'properties' at " + shown(path) + " must be an object");
      props = &*p;
    }
    std::set<std::string> required;
    if (auto q = s.find("required"); q != s.end()) {
      if (!q->is_array()) return invalid_argument("'required' at " + shown(path) + " must be an array of property names");
      for (const Json& n : *q) {
        if (!n.is_string() || !props || !props->contains(n.get<std::string>()))
          return invalid_argument("'required' at " + shown(path) + " names " + n.dump() + ", which is not one of its properties");
        required.insert(n.get<std::string>());
      }
    }
    const Json* extra = nullptr;
    bool closed = false;
    if (auto a = s.find("additionalProperties"); a != s.end()) {
      if (a->is_boolean()) closed = !a->get<bool>();
      else if (a->is_object()) extra = &*a;
      else return invalid_argument("'additionalProperties' at " + shown(path) + " must be a boolean or a schema");
    }
    if (!props || props->empty()) {
      if (closed) return r_.braces('{', b_.epsilon(), '}');
      if (!extra) return r_.any_object();
      Result<Expr> v = compile(*extra, join(path, "additionalProperties"), depth + 1);
      if (!v) return v;
      return r_.object_of(*v);
    }
    if (extra) return invalid_argument("'additionalProperties' at " + shown(path) + " may be a schema only when there are no 'properties'");
    // Declared properties only, in order (additionalProperties true allows more; emitting
    // none of them still validates). first[i]: properties i.. with none written before;
    // after[i]: properties i.. after one was written (each then starts with a comma).
    std::vector<Expr> prop;
    std::vector<bool> req;
    for (const auto& [name, sub] : props->items()) {
      Result<Expr> v = compile(sub, join(path, "properties." + name), depth + 1);
      if (!v) return v;
      prop.push_back(r_.member(r_.literal(Json(name)), *v));
      req.push_back(required.count(name) > 0);
    }
    const size_t n = prop.size();
    std::vector<Expr> first(n + 1), after(n + 1);
    first[n] = after[n] = b_.epsilon();
    for (size_t i = n; i-- > 0;) {
      const Expr with_comma = b_.seq({b_.byte(','), r_.ws(), prop[i], after[i + 1]});
      after[i] = req[i] ? with_comma : b_.alt({with_comma, after[i + 1]});
      const Expr here = b_.seq({prop[i], after[i + 1]});
      first[i] = req[i] ? here : b_.alt({here, first[i + 1]});
    }
    return r_.braces('{', first[0], '}');
  }

  Result<Expr> array(const Json& s, const std::string& path, int depth) {
    const Consumed consumed(&direct_);
    Expr item = r_.any_value();
    if (auto it = s.find("items"); it != s.end()) {
      Result<Expr> e = compile(*it, join(path, "items"), depth + 1);
      if (!e) return e;
      item = *e;
    }
    int lo = 0, hi = -1;
    for (const char* k : {"minItems", "maxItems"}) {
      auto it = s.find(k);
      if (it == s.end()) continue;
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxArrayBound)
        return invalid_argument("'" + std::string(k) + "' at " + shown(path) + " must be an integer from 0 to " + std::to_string(kMaxArrayBound));
      (std::string(k) == "minItems" ? lo : hi) = int(it->get<int64_t>());
    }
    if (hi >= 0 && hi < lo) return invalid_argument("'maxItems' at " + shown(path) + " is less than 'minItems'");
    if (hi == 0) return r_.braces('[', b_.epsilon(), ']');
    const Expr more = b_.seq({b_.byte(','), r_.ws(), item});
    // Up to k more items (k < 0: any number).
    auto tail = [&](int k) {
      if (k < 0) return b_.star(more);
      Expr t = b_.epsilon();
      for (int i = 0; i < k; ++i) t = b_.opt(b_.seq({more, t}));
      return t;
    };
    Expr body;
    if (lo == 0) {
      body = b_.opt(b_.seq({item, tail(hi < 0 ? -1 : hi - 1)}));
    } else {
      std::vector<Expr> parts{item};
      for (int i = 1; i < lo; ++i) parts.push_back(more);
      parts.push_back(tail(hi < 0 ? -1 : hi - lo));
      body = b_.seq(parts);
    }
    return r_.braces('[', body, ']');
  }

  // The definition `r` names ("#/$defs/NAME" or "#/definitions/NAME" of this schema), or null.
  const Json* resolve(const std::string& r) const {
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (r.rfind(p, 0) != 0) continue;
      const std::string name = r.substr(p.size());
      auto d = root_.find(p.substr(2, p.size() - 3));
      if (name.empty() || d == root_.end() || !d->is_object() || !d->contains(name)) return nullptr;
      return &(*d)[name];
    }
    return nullptr;
  }

  Result<Expr> reference(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return invalid_argument("'$ref' at " + shown(path) + " must be a string");
    const std::string r = ref.get<std::string>();
    // Reached again before any byte of a value was written: the rule would only ever expand
    // into itself (a → a, a → anyOf[b, …] → a), which no value matches.
    if (std::find(direct_.begin(), direct_.end(), r) != direct_.end()) {
      std::string chain;
      for (auto it = std::find(direct_.begin(), direct_.end(), r); it != direct_.end(); ++it) chain += *it + " → ";
      return invalid_argument("'$ref' at " + shown(path) + " makes a cycle (" + chain + r +
                              ") that writes nothing in between: no JSON value matches it; recurse through an object "
                              "property or an array item instead");
    }
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;
    const Json* def = resolve(r);
    if (!def)
      return invalid_argument("'$ref' at " + shown(path) + " is '" + r +
                              "', which does not resolve: only references to '#/$defs/NAME' or '#/definitions/NAME' of this "
                              "schema are supported");
    const Expr rule = b_.declare();
    refs_.emplace(r, rule);  // before compiling it: a recursive reference finds the rule
    direct_.push_back(r);
    Result<Expr> e = compile(*def, r.substr(2), depth + 1);
    direct_.pop_back();
    if (!e) return e;
    b_.define(rule, {{*e}});
    return rule;
  }

 public:
  // compile() of a whole schema, refused when a definition it uses matches no finite value (a
  // required property or a minItems array that recurses without end: decoding would never
  // finish it).
  Result<Expr> compile_root(const Json& s) {
    Result<Expr> e = compile(s, "", 0);
    if (!e) return e;
    HYPIC_RETURN_IF_ERROR(check_finite());
    return e;
  }
  Status check_finite() const {
    std::map<std::string, bool> ok;
    for (const auto& [r, rule] : refs_) ok[r] = false;
    for (bool changed = true; changed;) {  // least fixpoint: what a finite value can reach
      changed = false;
      for (auto& [r, v] : ok)
        if (!v && finite(*resolve(r), ok, 0)) v = changed = true;
    }
    for (const auto& [r, v] : ok)
      if (!v)
        return invalid_argument("no finite JSON value matches '" + r + "': it requires itself without end (through a "
                                "required property or an array with minItems); make the recursion optional");
    return Status::ok();
  }

 private:
  // Whether some finite value matches `s`, taking the definitions as `ok` says.
  bool finite(const Json& s, const std::map<std::string, bool>& ok, int depth) const {
    if (depth > kMaxSchemaDepth || !s.is_object()) return !s.is_boolean() || s.get<bool>();
    if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>()) return true;
    if (auto r = s.find("$ref"); r != s.end()) {
      auto it = r->is_string() ? ok.find(r->get<std::string>()) : ok.end();
      return it == ok.end() || it->second;
    }
    if (s.contains("const") || s.contains("enum")) return true;
    if (auto any = s.find("anyOf"); any != s.end() && any->is_array()) {
      for (const Json& x : *any)
        if (finite(x, ok, depth + 1)) return true;
      return false;
    }
    std::vector<std::string> types;
    const auto t = s.find("type");
    if (t != s.end() && t->is_string()) {
      types.push_back(*t);
    } else if (t != s.end() && t->is_array()) {
      for (const Json& x : *t)
        if (x.is_string()) types.push_back(x);
    } else if (s.contains("properties")) {
      types.push_back("object");
    } else if (s.contains("items")) {
      types.push_back("array");
    } else {
      return true;
    }
    for (const std::string& ty : types) {
      bool all = true;
      if (ty == "object" && s.contains("required") && s.contains("properties"))
        for (const Json& n : s["required"])
          if (n.is_string() && s["properties"].contains(n.get<std::string>()))
            all = all && finite(s["properties"][n.get<std::string>()], ok, depth + 1);
      if (ty == "array" && s.contains("items") && s.value("minItems", 0) > 0) all = finite(s["items"], ok, depth + 1);
      if (all) return true;
    }
    return false;
  }

  JsonRules r_;
  Builder& b_;
  const Json& root_;
  std::map<std::string, Expr> refs_;
  std::vector<std::string> direct_;  // references entered since the last byte a value writes
  size_t nodes_ = 0;
};

}  // namespace

std::shared_ptr<const Grammar> json_object_grammar() {
  static const std::shared_ptr<const Grammar> g = [] {
    Builder b;
    JsonRules r(&b);
    return b.build(r.any_object());
  }();
  return g;
}

Status too_large(const Builder& b) {
  if (b.rule_count() <= kMaxSchemaRules) return Status::ok();
  return invalid_argument("the schema makes a grammar of " + std::to_string(b.rule_count()) + " rules, more than the " +
                          std::to_string(kMaxSchemaRules) + " supported; simplify it (fewer properties, enum values, nesting)");
}

Result<std::shared_ptr<const Grammar>> json_schema_grammar(const Json& schema) {
  Builder b;
  SchemaCompiler c(&b, schema);
  Result<Expr> e = c.compile_root(schema);
  if (!e) return e.status();
  HYPIC_RETURN_IF_ERROR(too_large(b));
  return b.build(*e);
}

Status check_json_schema(const Json& schema) {  // json_schema_grammar without building the result
  Builder b;
  SchemaCompiler c(&b, schema);
  Result<Expr> e = c.compile_root(schema);
  return e ? too_large(b) : e.status();
}

namespace {

// Raw text of an XML parameter: printable and whitespace ASCII but '<', and well-formed UTF-8.
Expr raw_text(Builder& b) {
  ByteSet plain;
  for (int c = 0x20; c < 0x80; ++c) plain.set(size_t(c));
  plain.set('\n');
  plain.set('\t');
  plain.reset('<');
  const Expr cont = b.range(0x80, 0xBF);
  const Expr utf8 = b.alt({b.seq({b.range(0xC2, 0xDF), cont}), b.seq({b.byte(0xE0), b.range(0xA0, 0xBF), cont}),
                           b.seq({b.range(0xE1, 0xEC), cont, cont}), b.seq({b.byte(0xED), b.range(0x80, 0x9F), cont}),
                           b.seq({b.range(0xEE, 0xEF), cont, cont}), b.seq({b.byte(0xF0), b.range(0x90, 0xBF), cont, cont}),
                           b.seq({b.range(0xF1, 0xF3), cont, cont, cont}), b.seq({b.byte(0xF4), b.range(0x80, 0x8F), cont, cont})});
  return b.star(b.alt({b.bytes(plain), utf8}));
}

// A value as Qwen3.5 writes it in a <parameter> element (json_schema.h ToolCallFormat).
Result<Expr> xml_value(Builder& b, JsonRules& r, SchemaCompiler& c, const Json& s, const std::string& path) {
  if (s.is_object() && s.contains("enum") && s["enum"].is_array() && !s["enum"].empty() && s["enum"].size() <= kMaxEnumValues) {
    std::vector<Expr> opts;
    for (const Json& v : s["enum"]) opts.push_back(b.literal(v.is_string() ? v.get<std::string>() : v.dump()));
    return b.alt(opts);
  }
  const std::string type = s.is_object() && s.contains("type") && s["type"].is_string() ? s["type"].get<std::string>() : "";
  if (type == "string") return raw_text(b);
  if (type == "integer") return r.integer();
  if (type == "number") return r.number();
  if (type == "boolean") return b.alt({b.literal("True"), b.literal("False"), b.literal("true"), b.literal("false")});
  return c.compile(s, path, 1);
}

Result<Expr> xml_call(Builder& b, JsonRules& r, const ToolSpec& t) {
  const Json& p = t.parameters;
  const Json* props = p.is_object() && p.contains("properties") && p["properties"].is_object() ? &p["properties"] : nullptr;
  std::vector<Expr> parts{b.literal("<function=" + t.name + ">\n")};
  if (!props || props->empty()) {  // any parameters: KEY is a name, VALUE raw text
    ByteSet key;
    for (int ch = 'a'; ch <= 'z'; ++ch) key.set(size_t(ch));
    for (int ch = 'A'; ch <= 'Z'; ++ch) key.set(size_t(ch));
    for (int ch = '0'; ch <= '9'; ++ch) key.set(size_t(ch));
    key.set('_');
    key.set('-');
    parts.push_back(b.star(b.seq({b.literal("<parameter="), b.plus(b.bytes(key)), b.literal(">\n"), raw_text(b),
                                  b.literal("\n</parameter>\n")})));
  } else {
    SchemaCompiler c(&b, p);
    std::set<std::string> required;
    if (p.contains("required") && p["required"].is_array())
      for (const Json& n : p["required"])
        if (n.is_string()) required.insert(n.get<std::string>());
    for (const auto& [key, sub] : props->items()) {
      Result<Expr> v = xml_value(b, r, c, sub, "properties." + key);
      if (!v) return v;
      const Expr elem = b.seq({b.literal("<parameter=" + key + ">\n"), *v, b.literal("\n</parameter>\n")});
      parts.push_back(required.count(key) ? elem : b.opt(elem));
    }
    HYPIC_RETURN_IF_ERROR(c.check_finite());
  }
  parts.push_back(b.literal("</function>"));
  return b.seq(parts);
}

}  // namespace

Result<std::shared_ptr<const Grammar>> tool_call_grammar(const ToolCallFormat& format,
                                                         const std::vector<ToolSpec>& tools, bool parallel) {
  if (tools.empty()) return invalid_argument("no tools to call");
  Builder b;
  JsonRules r(&b);
  std::vector<Expr> calls;
  for (const ToolSpec& t : tools) {
    if (format.xml) {
      Result<Expr> e = xml_call(b, r, t);
      if (!e) return Status(e.status().code(), "tool '" + t.name + "': " + e.status().message());
      calls.push_back(*e);
      continue;
    }
    Expr args = r.any_object();
    if (!t.parameters.is_null()) {
      SchemaCompiler c(&b, t.parameters);
      Result<Expr> e = c.compile_root(t.parameters);
      if (!e) return Status(e.status().code(), "tool '" + t.name + "': " + e.status().message());
      args = *e;
    }
    // {"name": "NAME", "arguments": ARGS}, spaced as json.dumps writes it.
    calls.push_back(b.seq({b.literal("{\"name\": " + Json(t.name).dump() + ", \"arguments\": "), args, b.byte('}')}));
  }
  const Expr call = b.seq({b.literal(format.open), b.alt(calls), b.literal(format.close)});
  const Expr root = parallel ? b.seq({call, b.star(b.seq({b.literal(format.separator), call}))}) : call;
  HYPIC_RETURN_IF_ERROR(too_large(b));
  return b.build(root);
}

}  // namespace hypic::grammar

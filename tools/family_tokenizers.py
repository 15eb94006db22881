#!/usr/bin/env python3
"""Small byte-level BPE tokenizers with the exact settings of a model family, for test checkpoints.

    from family_tokenizers import build, model_files, reference_encoder
    tokenizer_json, tokenizer_config = build("bailing", train_text, vocab_size=512)
    files = model_files("kimi", train_text, vocab_size=1024)  # {file name: text} for a model dir
    enc = reference_encoder("kimi", *build("kimi", train_text, 1024))  # .encode / .decode / ...

API (every family):
  build(family, train_text, vocab_size) -> (main file text, tokenizer_config dict). The main
      file is MODEL_FILE[family]: "tokenizer.json" for qwen / bailing / minimax / ling3, the
      tiktoken rank file "tiktoken.model" for kimi (Kimi ships no tokenizer.json).
  model_files(family, train_text, vocab_size) -> {"tokenizer.json" or "tiktoken.model": text,
      "tokenizer_config.json": text}: write each into the checkpoint directory; hypic reads
      either layout (Tokenizer::load(dir)).
  reference_encoder(family, main_text, config) -> an object with encode(text,
      parse_special=True) -> ids, decode(ids, skip_special=False) -> str, token_to_id(s),
      vocab_size (max id + 1) and special_ids: HF `tokenizers` for tokenizer.json families,
      tiktoken (with Kimi's regex and special tokens, as tokenization_kimi.py builds it) for
      kimi. Use it to encode prompts for goldens.

`build(family, train_text, vocab_size)` trains a deterministic byte-level BPE with
Hugging Face `tokenizers` (any Python with `tokenizers`, e.g. /work/main/.venv/bin/python),
using the family's normalizer, Split regex + ByteLevel pre-tokenizer, ByteLevel decoder and
ByteLevel post-processor, then appends the family's special tokens (those its chat template
writes, plus bos / eos / pad / unk) as added special tokens at the top of the vocabulary. It
returns (tokenizer.json text, tokenizer_config.json dict) where the config names the family's
bos / eos / pad token strings and carries its real chat_template Jinja text.

The token ids are NOT the real model's: a tiny vocabulary cannot keep them (Ring's
<|endoftext|> is 156892 of 157184, MiniMax's <end_of_sentence> 200020 of 200064). Only the
token strings, the splitting rules and the chat template are the family's. `vocab_size` counts
the special tokens too; the trainer may stop earlier on a small text (then the vocabulary is
smaller and the special tokens follow the learned tokens directly).

Families ("qwen" is byte-for-byte what tools/make_golden.py builds today, so it can switch to
this helper; ling3 and kimi are described at LING3_* and KIMI_* below):
  qwen     Qwen2 / Qwen3 / Qwen3-Next: NFC; Split(Qwen2 regex, Isolated); specials
           <|endoftext|> <|im_start|> <|im_end|>; eos <|im_end|>, pad <|endoftext|>, no bos;
           make_golden.py's minimal ChatML template.
  bailing  Ling 2.0 / Ring 2.0 / Ring-mini-linear-2.0 / Ring-flash-linear-2.0 (inclusionAI,
           model_type bailing_moe_linear): Split(Bailing regex, Isolated), the regex of the real
           tokenizer.json as quoted by llama.cpp (src/llama-vocab.cpp, "bailingmoe", used for
           "bailingmoe2" = Ling-mini-base-2.0); specials <|startoftext|> (bos, real id 156891),
           <|endoftext|> (pad and the model's eos, 156892), <|role_end|> (the tokenizer's
           eos, 156895), <role> and </role> (157151, 157152); tokenizer_config.json and chat
           template from inclusionAI/Ring-V2 resource/tokenizer/config_sft/tokenizer_config.json
           (identical to inclusionAI/Ling-V2's). NFC normalizer: ASSUMED (the real tokenizer.json,
           over 4 MiB, could not be read).
  minimax  MiniMax-M1 / MiniMax-Text-01 (MiniMaxAI, model_type minimax, vocab 200064):
           Split(o200k regex, Isolated); specials <beginning_of_sentence> (bos),
           <end_of_sentence> (eos; real id 200020), <begin_of_document>, <end_of_document>
           (unk); no pad token (the real config has none); tokenizer_config.json and chat
           template from MiniMax-AI/MiniMax-M1 tokenizer_config.json, except tokenizer_class
           PreTrainedTokenizerFast for the real GPT2Tokenizer (with that class, transformers
           >= 5 replaces tokenizer.json's pre-tokenizer by GPT-2's). The regex is inferred: all
           but 4 of the ~199k merges of MiniMax-M1's merges.txt lie inside one o200k piece
           (Qwen2's regex splits 1736 of them, llama3's 585), and MiniMax-M2, whose tokenizer.json
           llama.cpp quotes as the o200k regex, has the same vocabulary size and eos id.
           NFC normalizer: ASSUMED (no merge of M1 is outside NFC).
All three: ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False) as
pre-tokenizer, decoder and post-processor (Qwen's; ASSUMED for the other two: the
post-processor adds no ids either way), BPE with no unk_token, dropout, byte_fallback or
subword affixes.
"""
import base64
import json

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

FAMILIES = ("qwen", "bailing", "minimax", "ling3", "kimi")
MODEL_FILE = {"qwen": "tokenizer.json", "bailing": "tokenizer.json", "minimax": "tokenizer.json",
              "ling3": "tokenizer.json", "kimi": "tiktoken.model"}

QWEN2_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
            r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
BAILING_RE = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|"""
              r"""\s*[\r\n]|\s+(?!\S)|\s+""")
O200K_RE = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"""
            r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"""
            r"""[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# tools/make_golden.py's template (ChatML, no default system turn).
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# inclusionAI/Ring-V2 resource/tokenizer/config_sft/tokenizer_config.json "chat_template",
# verbatim (the same file is in inclusionAI/Ling-V2).
BAILING_CHAT_TEMPLATE = (
    "{% set thinking_option = 'off' %}\n"
    "{{- '<role>SYSTEM</role>' }}\n"
    "{%- if messages[0].role == 'system' %}\n"
    "    {{- messages[0].content + '\\n' }}\n"
    '{%- endif %}\n'
    '{%- if tools %}\n'
    '    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou'
    ' are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}\n'
    '    {%- for tool in tools %}\n'
    '        {{- "\\n" }}\n'
    '        {{- tool | tojson }}\n'
    '    {%- endfor %}\n'
    '    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and a'
    'rguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, '
    '\\"arguments\\": <args-json-object>}\\n</tool_call>\\n" }}\n'
    '{%- endif %}\n'
    "{{- 'detailed thinking ' + thinking_option + '<|role_end|>' }}\n"
    '{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n'
    '{%- for message in messages[::-1] %}\n'
    '    {%- set index = (messages|length - 1) - loop.index0 %}\n'
    '    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and n'
    "ot(message.content.startswith('<tool_response>') and message.content.endswith('</tool_respon"
    "se>')) %}\n"
    '        {%- set ns.multi_step_tool = false %}\n'
    '        {%- set ns.last_query_index = index %}\n'
    '    {%- endif %}\n'
    '{%- endfor %}\n'
    '{%- for message in messages %}\n'
    '    {%- if message.content is string %}\n'
    '        {%- set content = message.content %}\n'
    '    {%- else %}\n'
    "        {%- set content = '' %}\n"
    '    {%- endif %}\n'
    '    {%- if message.role == "user" %}\n'
    "        {{- '<role>HUMAN</role>' + message.content + '<|role_end|>' }}\n"
    '    {%- elif message.role == "system" and not loop.first %}\n'
    "        {{- '<role>SYSTEM</role>' + message.content + '<|role_end|>' }}\n"
    '    {%- elif message.role == "assistant" %}\n'
    "        {%- set reasoning_content = '' %}\n"
    '        {%- if message.reasoning_content is string %}\n'
    '            {%- set reasoning_content = message.reasoning_content %}\n'
    '        {%- else %}\n'
    "            {%- if '</think>' in content %}\n"
    "                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split("
    "'<think>')[-1].lstrip('\\n') %}\n"
    "                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    '            {%- endif %}\n'
    '        {%- endif %}\n'
    '        {%- if loop.index0 > ns.last_query_index %}\n'
    '            {%- if reasoning_content %}\n'
    "                {{- '<role>ASSISTANT</role>' + '\\n<think>\\n' + reasoning_content.strip('\\n')"
    " + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n"
    '            {%- else %}\n'
    "                {{- '<role>ASSISTANT</role>' + content }}\n"
    '            {%- endif %}\n'
    '        {%- else %}\n'
    "            {{- '<role>ASSISTANT</role>' + content }}\n"
    '        {%- endif %}\n'
    '        {%- if message.tool_calls %}\n'
    '            {%- for tool_call in message.tool_calls %}\n'
    '                {%- if (loop.first and content) or (not loop.first) %}\n'
    "                    {{- '\\n' }}\n"
    '                {%- endif %}\n'
    '                {%- if tool_call.function %}\n'
    '                    {%- set tool_call = tool_call.function %}\n'
    '                {%- endif %}\n'
    '                {{- \'<tool_call>\\n{"name": "\' }}\n'
    '                {{- tool_call.name }}\n'
    '                {{- \'", "arguments": \' }}\n'
    '                {%- if tool_call.arguments is string %}\n'
    '                    {{- tool_call.arguments }}\n'
    '                {%- else %}\n'
    '                    {{- tool_call.arguments | tojson }}\n'
    '                {%- endif %}\n'
    "                {{- '}\\n</tool_call>' }}\n"
    '            {%- endfor %}\n'
    '        {%- endif %}\n'
    "        {{- '<|role_end|>' }}\n"
    '    {%- elif message.role == "tool" %}\n'
    '        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}\n'
    "            {{- '<role>OBSERVATION</role>' }}\n"
    '        {%- endif %}\n'
    "        {{- '\\n<tool_response>\\n' }}\n"
    '        {{- content }}\n'
    "        {{- '\\n</tool_response>' }}\n"
    '        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}\n'
    "            {{- '<|role_end|>' }}\n"
    '        {%- endif %}\n'
    '    {%- endif %}\n'
    '{%- endfor %}\n'
    '{%- if add_generation_prompt %}\n'
    "    {{- '<role>ASSISTANT</role>' }}\n"
    '{%- endif %}'
)

# MiniMax-AI/MiniMax-M1 tokenizer_config.json "chat_template", verbatim. (MiniMax-Text-01's differs:
# no <begin_of_document>, system turns written where they stand; see src/tokenizer/minimax.cpp.)
MINIMAX_CHAT_TEMPLATE = (
    "{{ '<begin_of_document>' -}}{% set ns = namespace(system_prompt='') -%}{% for message in mes"
    "sages -%}{% if message['role'] == 'system' -%}{% set ns.system_prompt = ns.system_prompt + m"
    "essage['content'][0]['text'] -%}{% endif -%}{%- endfor -%}{% if ns.system_prompt != '' -%}{{"
    " '<beginning_of_sentence>system ai_setting=assistant\n"
    "' + ns.system_prompt + '<end_of_sentence>\n"
    "' -}}{%- endif -%}{% if tools -%}{{ '<beginning_of_sentence>system tool_setting=tools\n"
    'You are provided with these tools:\n'
    '<tools>\n'
    "' -}}{% for tool in tools -%}{{ tool | tojson ~ '\n"
    "' -}}{%- endfor -%}{{ '</tools>\n"
    '\n'
    'If you need to call tools, please respond with <tool_calls></tool_calls> XML tags, and provi'
    'de tool-name and json-object of arguments, following the format below:\n'
    '<tool_calls>\n'
    "{''name'': <tool-name-1>, ''arguments'': <args-json-object-1>}\n"
    '...\n'
    '</tool_calls><end_of_sentence>\n'
    "' -}}{%- endif -%}{% for message in messages -%}{% if message['role'] == 'user' -%}{{ '<begi"
    'nning_of_sentence>user name=user\n'
    "' + message['content'][0]['text'] + '<end_of_sentence>\n"
    "' -}}{% elif message['role'] == 'assistant' -%}{{ '<beginning_of_sentence>ai name=assistant\n"
    "' -}}{% for content in message['content'] | selectattr('type', 'equalto', 'text') -%}{{ cont"
    "ent['text'] -}}{%- endfor -%}{{ '<end_of_sentence>\n"
    "' -}}{% elif message['role'] == 'tool' -%}{{ '<beginning_of_sentence>tool name=tools\n"
    "' }} {%- for content in message['content'] -%}{{- 'tool name: ' + content['name'] + '\n"
    "' + 'tool result: ' + content['text'] + '\n"
    '\n'
    "' -}} {%- endfor -%}{{- '<end_of_sentence>\n"
    "' -}}{% endif -%}{%- endfor -%}{% if add_generation_prompt -%}{{ '<beginning_of_sentence>ai "
    'name=assistant\n'
    "' -}}{%- endif -%}"
)


# MiniMaxAI/MiniMax-Text-01 tokenizer_config.json "chat_template" (as served on a Hugging Face
# mirror, refs/pr/39 at 7466de1 "Guide document for function calling (#32)"), verbatim. Not used
# by build(); the "minimax-text-01" chat template of hypic follows it.
MINIMAX_TEXT_01_CHAT_TEMPLATE = (
    '{% for message in messages %}'
    "{% if message['role'] == 'system' %}{{ '<beginning_of_sentence>system ai_setting=assistant\\n' + message['content'][0]['text'] + '<end_of_sentence>\\n'}}"
    "{% elif message['role'] == 'user' %}{{ '<beginning_of_sentence>user name=user\\n' + message['content'][0]['text'] + '<end_of_sentence>\\n'}}"
    "{% elif message['role'] == 'assistant' %}{{ '<beginning_of_sentence>ai name=assistant\\n' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}"
    "{% endfor %}{{ '<end_of_sentence>\\n' }}"
    '{% elif message[\'role\'] == \'function\' %}{{ \'<beginning_of_sentence>system function_response=functions\\n\' + \'{"name": "\' + message[\'name\'] + \'", "response": \' + message[\'content\'][0][\'text\'] + \'}\' + \'<end_of_sentence>\\n\'}}'
    '{% endif %}{% endfor %}{% if tools %}'
    "{% for function in tools %}{{ '<beginning_of_sentence>system function_setting=functions\\n' + function | tojson + '<end_of_sentence>\\n'}}"
    '{% endfor %}{% endif %}'
    "{% if add_generation_prompt %}{{ '<beginning_of_sentence>ai name=assistant\\n' }}"
    '{% endif %}'
)


# ---- ling3: Ling-3.0 (inclusionAI, BailingMoeV3, model_type bailing_hybrid) -------------------
# Tokenizer settings ASSUMED to be Ling 2.0's (Bailing regex, NFC): Ling-3.0 keeps the 157,184-id
# vocabulary; its tokenizer.json could not be read here. Specials: Bailing's five, plus the tags
# its template and tool format write (<think> </think> <tool_call> </tool_call> <arg_key>
# </arg_key> <arg_value> </arg_value> <tool_response> </tool_response>: single tokens per
# llama.cpp's ling3 parser (common/parsers/ling3.cpp, "preserved tokens"); added here as
# NON-special tokens, ASSUMED, as Qwen3 marks its think / tool tags).
LING3_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|role_end|>", "<role>", "</role>"]
LING3_ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
               "<arg_value>", "</arg_value>", "<tool_response>", "</tool_response>"]

# Ling-3.0's chat template, RECONSTRUCTED: the checkpoints' chat_template.jinja could not be read
# here. It states what ollama's BailingRenderer (ollama/ollama model/renderers/bailing.go,
# "mirroring the reference chat_template.jinja shipped with the checkpoints") and its test
# (bailing_test.go) render, for text messages: the system block always first, the thinking
# directive "detailed thinking on|off" (enable_thinking, default on) after a leading system
# message unless that message already carries one; HUMAN / SYSTEM turns; an assistant turn
# "\n<think>{reasoning}</think>{content}" (reasoning from reasoning_content or a
# <think>...</think> prefix of the content); generation prompt "<role>ASSISTANT</role>\n<think>"
# (thinking on) or "...\n<think></think>" (off). The same layout appears in llama.cpp's ling3
# parser comments and in the Ling-3.0 GGUF model cards' prompt format. Tools are not rendered.
LING3_CHAT_TEMPLATE = (
    "{%- set thinking = 'off' if (enable_thinking is defined and not enable_thinking) else 'on' -%}"
    "{{- '<role>SYSTEM</role>' -}}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{{- messages[0].content -}}"
    "{%- if 'detailed thinking on' not in messages[0].content and 'detailed thinking off' not in messages[0].content -%}"
    "{{- '\\ndetailed thinking ' + thinking -}}"
    "{%- endif -%}"
    "{%- else -%}"
    "{{- 'detailed thinking ' + thinking -}}"
    "{%- endif -%}"
    "{{- '<|role_end|>' -}}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' -%}"
    "{%- if not loop.first -%}{{- '<role>SYSTEM</role>' + message.content + '<|role_end|>' -}}{%- endif -%}"
    "{%- elif message.role == 'user' -%}"
    "{{- '<role>HUMAN</role>' + message.content + '<|role_end|>' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{%- set content = message.content -%}"
    "{%- set reasoning = message.reasoning_content if message.reasoning_content is string else '' -%}"
    "{%- if not reasoning and '</think>' in content -%}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{%- if reasoning -%}"
    "{{- '<role>ASSISTANT</role>\\n<think>' + reasoning.strip('\\n') + '</think>' + content.lstrip('\\n') + '<|role_end|>' -}}"
    "{%- else -%}"
    "{{- '<role>ASSISTANT</role>\\n<think></think>' + content + '<|role_end|>' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<role>ASSISTANT</role>\\n<think>' + ('</think>' if thinking == 'off' else '') -}}"
    "{%- endif -%}"
)

# ---- kimi: Kimi-Linear-48B-A3B (moonshotai; Kimi-K2's tokenizer family) ---------------------
# tiktoken rank file + tokenizer_config.json. The split regex is tokenization_kimi.py's pat_str
# (copies of moonshotai/Kimi-Linear-48B-A3B-Instruct's file in troy12x/quasar-kimi and in an
# "Adapted Kimi-Linear tokenizer ... Revision: 919416f" copy; Kimi-K2's is the same), run by
# tiktoken (no normalizer). Special tokens: ids n .. n+257 (n = number of ranks; Kimi-Linear's
# range(n, n + 256 + 2)), named by tokenizer_config.json's added_tokens_decoder, the rest
# "<|reserved_token_{id}|>". The named ones and their offsets are Kimi-K2's tokenizer_config.json
# (tiny-random/kimi-k2; Kimi-Linear's config.json agrees: bos 163584 = n, eos 163586 = n+2,
# pad 163839 = n+255); the tool-call markers are special=false there, as here.
KIMI_RE = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
KIMI_RESERVED = 256 + 2
# offset from n -> (content, special)
KIMI_NAMED = {
    0: ("[BOS]", True), 1: ("[EOS]", True), 2: ("<|im_end|>", True), 3: ("<|im_user|>", True),
    4: ("<|im_assistant|>", True), 6: ("<|start_header_id|>", True),
    7: ("<|end_header_id|>", True), 9: ("[EOT]", True), 10: ("<|im_system|>", True),
    11: ("<|tool_calls_section_begin|>", False), 12: ("<|tool_calls_section_end|>", False),
    13: ("<|tool_call_begin|>", False), 14: ("<|tool_call_argument_begin|>", False),
    15: ("<|tool_call_end|>", False), 17: ("<|im_middle|>", True),
    254: ("[UNK]", True), 255: ("[PAD]", True),
}

# Kimi-Linear-48B-A3B-Instruct's chat template, PARTLY RECONSTRUCTED. Lines 1-25 (the
# render_content macro, the tool declaration, the role headers) are verbatim from the
# chat_template.jinja that transformers wrote when the Kimi-Linear tokenizer was saved
# (hyper-accel/tiny-random-kimi-linear, "Upload tokenizer from kimi_linear"); the rest (tool
# calls, tool results, <|im_end|>, the generation prompt) could not be read there and follows
# Kimi-K2's templates, which share those lines (llama.cpp models/templates/Kimi-K2-*.jinja).
# For text messages: "<|im_user|>user<|im_middle|>" / "<|im_assistant|>assistant<|im_middle|>"
# / "<|im_system|>{role}<|im_middle|>", the content, "<|im_end|>"; no default system message
# (Kimi-K2-Instruct's template adds one, Kimi-Linear's lines 20-21 do not); generation prompt
# "<|im_assistant|>assistant<|im_middle|>".
KIMI_CHAT_TEMPLATE = (
    "{% macro render_content(msg) -%}\n"
    "{%- set c = msg.get('content') -%}\n"
    "{%- if c is string -%}\n"
    "{{ c }}\n"
    "{%- elif c is not none -%}\n"
    "{% for content in c -%}\n"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content -%}\n"
    "<|media_start|>image<|media_content|><|media_pad|><|media_end|>\n"
    "{% else -%}\n"
    "{{ content['text'] }}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{%- endmacro %}\n"
    "\n"
    "\n"
    "{%- if tools -%}\n"
    "<|im_system|>tool_declare<|im_middle|>{{ tools | tojson(separators=(',', ':')) }}<|im_end|>\n"
    "{%- endif -%}\n"
    "{% for message in messages %}\n"
    "{%- set role_name = message.get('name') or message['role'] -%}\n"
    "{%- if message['role'] == 'user' -%}\n"
    "<|im_user|>{{role_name}}<|im_middle|>\n"
    "{%- elif message['role'] == 'assistant' -%}\n"
    "<|im_assistant|>{{role_name}}<|im_middle|>\n"
    "{%- else -%}\n"
    "<|im_system|>{{role_name}}<|im_middle|>\n"
    "{%- endif -%}\n"
    "{%- if message['role'] == 'assistant' and message.get('tool_calls') -%}\n"
    "{{render_content(message)}}<|tool_calls_section_begin|>\n"
    "{%- for tool_call in message['tool_calls'] -%}\n"
    "{%- set formatted_id = tool_call['id'] -%}\n"
    "<|tool_call_begin|>{{ formatted_id }}<|tool_call_argument_begin|>{% if tool_call['function']['arguments'] is string %}{{ tool_call['function']['arguments'] }}{% else %}{{ tool_call['function']['arguments'] | tojson }}{% endif %}<|tool_call_end|>\n"
    "{%- endfor -%}\n"
    "<|tool_calls_section_end|>\n"
    "{%- elif message['role'] == 'tool' -%}\n"
    "{%- set tool_call_id = message.tool_call_id -%}\n"
    "## Return of {{ tool_call_id }}\n"
    "{{render_content(message)}}\n"
    "{%- elif message['content'] is not none -%}\n"
    "{{render_content(message)}}\n"
    "{%- endif -%}\n"
    "<|im_end|>\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "<|im_assistant|>assistant<|im_middle|>\n"
    "{%- endif -%}"
)


def _qwen_config(specials, ids):
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": _added_tokens_decoder(specials, ids),
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": QWEN_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def _bailing_config(specials, ids):
    # inclusionAI/Ring-V2 config_sft/tokenizer_config.json, less its cls_token "[CLS]" and
    # gmask_token "[gMASK]" (not in this vocabulary) and model_max_length (1e30 there).
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": _added_tokens_decoder(specials, ids),
        "bos_token": "<|startoftext|>",
        "chat_template": BAILING_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|role_end|>",
        "fast_tokenizer": True,
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def _minimax_config(specials, ids):
    # MiniMax-AI/MiniMax-M1 tokenizer_config.json (it has no pad token), except
    # tokenizer_class: the real "GPT2Tokenizer" makes transformers >= 5 rebuild GPT-2's
    # ByteLevel pre-tokenizer and ignore tokenizer.json's Split, so AutoTokenizer would not
    # encode as tokenizer.json (and hypic) do.
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": _added_tokens_decoder(specials, ids),
        "bos_token": "<beginning_of_sentence>",
        "chat_template": MINIMAX_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<end_of_sentence>",
        "model_max_length": 40960000,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<end_of_document>",
    }


def _ling3_config(specials, ids, added=(), added_ids=()):
    # Ling 2.0's tokenizer_config.json (see _bailing_config) with the reconstructed Ling-3.0
    # template; the non-special tags as such.
    cfg = _bailing_config(specials, ids)
    cfg["added_tokens_decoder"].update(_added_tokens_decoder(added, added_ids, special=False))
    cfg["chat_template"] = LING3_CHAT_TEMPLATE
    return cfg


def _kimi_config(n_ranks):
    """tokenizer_config.json of a Kimi tiktoken tokenizer whose rank file has n_ranks tokens."""
    dec = {}
    for off, (content, special) in sorted(KIMI_NAMED.items()):
        dec[str(n_ranks + off)] = {"content": content, "lstrip": False, "normalized": False,
                                   "rstrip": False, "single_word": False, "special": special}
    return {
        "added_tokens_decoder": dec,
        "additional_special_tokens": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>",
                                      "<|start_header_id|>", "<|end_header_id|>", "[EOT]",
                                      "<|im_system|>", "<|im_middle|>"],
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]",
        "chat_template": KIMI_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "model_max_length": 1048576,
        "pad_token": "[PAD]",
        "tokenizer_class": "TikTokenTokenizer",
        "unk_token": "[UNK]",
    }


def kimi_special_tokens(n_ranks):
    """{content: id} of all KIMI_RESERVED special ids, as tokenization_kimi.py builds them."""
    out = {}
    for i in range(n_ranks, n_ranks + KIMI_RESERVED):
        named = KIMI_NAMED.get(i - n_ranks)
        out[named[0] if named else f"<|reserved_token_{i}|>"] = i
    return out


def _added_tokens_decoder(specials, ids, special=True):
    return {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": special} for s, i in zip(specials, ids)}


# family -> (split regex, NFC normalizer, special tokens in id order, config builder)
_FAMILY = {
    "qwen": (QWEN2_RE, True, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], _qwen_config),
    "bailing": (BAILING_RE, True,
                ["<|startoftext|>", "<|endoftext|>", "<|role_end|>", "<role>", "</role>"],
                _bailing_config),
    "minimax": (O200K_RE, True,
                ["<beginning_of_sentence>", "<end_of_sentence>", "<begin_of_document>",
                 "<end_of_document>"],
                _minimax_config),
    "ling3": (BAILING_RE, True, LING3_SPECIALS, _ling3_config),
}
# Non-special added tokens, after the special ones.
_ADDED = {"ling3": LING3_ADDED}


def special_tokens(family):
    """The family's special tokens, in the order build() gives them ids (kimi: the named ones)."""
    if family == "kimi":
        return [c for _, (c, sp) in sorted(KIMI_NAMED.items()) if sp]
    return list(_FAMILY[family][2])


def added_tokens(family):
    """The family's non-special added tokens (after the special ones)."""
    if family == "kimi":
        return [c for _, (c, sp) in sorted(KIMI_NAMED.items()) if not sp]
    return list(_ADDED.get(family, []))


def build(family, train_text, vocab_size):
    """(tokenizer.json text, tokenizer_config.json dict) of a small BPE for `family`.

    Deterministic: the same arguments give the same bytes. `train_text` is split into lines
    (ends kept) for the trainer; `vocab_size` includes the special tokens.
    """
    if family == "kimi":
        return _build_kimi(train_text, vocab_size)
    if family not in _FAMILY:
        raise ValueError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
    regex, nfc, specials, config = _FAMILY[family]
    added = _ADDED.get(family, [])
    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(specials) - len(added),
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(train_text.splitlines(keepends=True), trainer=trainer)
    base = tok.get_vocab_size()
    tok.add_special_tokens(specials)  # after the learned tokens, as the real models have them
    if added:
        tok.add_tokens([AddedToken(a, special=False, normalized=False) for a in added])
    assert tok.get_vocab_size() == base + len(specials) + len(added)
    # decoders.ByteLevel() does not keep its flags in this tokenizers version: write them out.
    d = json.loads(tok.to_str())
    d["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok = Tokenizer.from_str(json.dumps(d))
    ids = [tok.token_to_id(s) for s in specials]
    if added:
        return tok.to_str(), config(specials, ids, added, [tok.token_to_id(a) for a in added])
    return tok.to_str(), config(specials, ids)


def _build_kimi(train_text, vocab_size):
    """(tiktoken.model text, tokenizer_config dict): a byte-level BPE trained with Kimi's regex,
    written as tiktoken ranks (rank = the trained id: the 256 bytes, then the merges in order).
    `vocab_size` counts the ranks and the KIMI_RESERVED special ids after them, so it must be
    above 256 + 258; e.g. 1024 gives 766 ranks."""
    n_ranks = vocab_size - KIMI_RESERVED
    if n_ranks < 257:
        raise ValueError(f"kimi: vocab_size {vocab_size} leaves {n_ranks} ranks; need >= 257 "
                         f"(256 bytes + merges) besides the {KIMI_RESERVED} special ids")
    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(KIMI_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=n_ranks, min_frequency=2, show_progress=False,
                                  special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_text.splitlines(keepends=True), trainer=trainer)
    byte_of = {ch: b for b, ch in _bytes_to_unicode().items()}
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    lines = []
    for s, i in vocab:
        lines.append(base64.b64encode(bytes(byte_of[c] for c in s)).decode() + f" {i}")
    return "\n".join(lines) + "\n", _kimi_config(len(vocab))


def _bytes_to_unicode():
    """GPT-2's byte -> character table (ByteLevel's alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def model_files(family, train_text, vocab_size):
    """{file name: text} of what a model directory needs for `family`'s tokenizer."""
    main, cfg = build(family, train_text, vocab_size)
    return {MODEL_FILE[family]: main, "tokenizer_config.json": json.dumps(cfg, indent=2, ensure_ascii=False) + "\n"}


class _HfEncoder:
    def __init__(self, tok_json):
        self.tok = Tokenizer.from_str(tok_json)
        self.vocab_size = self.tok.get_vocab_size(with_added_tokens=True)
        self.special_ids = {i for i, t in self.tok.get_added_tokens_decoder().items() if t.special}

    def encode(self, text, parse_special=True):
        self.tok.encode_special_tokens = not parse_special
        try:
            return self.tok.encode(text, add_special_tokens=False).ids
        finally:
            self.tok.encode_special_tokens = False

    def decode(self, ids, skip_special=False):
        return self.tok.decode(ids, skip_special_tokens=skip_special)

    def token_to_id(self, s):
        return self.tok.token_to_id(s)


class TiktokenEncoder:
    """tiktoken with a rank file's text, a split regex and {content: id} special tokens; the
    non-special ones (`plain`) stay matched when parse_special is false (HF's rule, as hypic)."""

    def __init__(self, ranks_text, pattern, specials, plain=(), nfc=False):
        import tiktoken
        ranks = {}
        for line in ranks_text.splitlines():
            if line:
                b64, r = line.split()
                ranks[base64.b64decode(b64)] = int(r)
        self.enc = tiktoken.Encoding("hypic-reference", pat_str=pattern, mergeable_ranks=ranks,
                                     special_tokens=dict(specials))
        self.n_ranks = len(ranks)
        self.specials = dict(specials)
        self.plain = set(plain)
        self.special_ids = {i for s, i in self.specials.items() if s not in self.plain}
        self.vocab_size = max([self.n_ranks - 1] + list(self.specials.values())) + 1
        self.nfc = nfc

    def encode(self, text, parse_special=True):
        if self.nfc:
            text = normalizers.NFC().normalize_str(text)
        allowed = "all" if parse_special else self.plain
        return self.enc.encode(text, allowed_special=allowed, disallowed_special=())

    def decode(self, ids, skip_special=False):
        if skip_special:
            ids = [i for i in ids if i not in self.special_ids]
        return self.enc.decode(ids, errors="replace")

    def token_to_id(self, s):
        if s in self.specials:
            return self.specials[s]
        try:
            return self.enc.encode_single_token(s.encode("utf-8"))
        except KeyError:
            return None


def reference_encoder(family, main_text, config):
    """The reference implementation of `family`'s tokenizer, from build()'s two results."""
    if MODEL_FILE[family] == "tokenizer.json":
        return _HfEncoder(main_text)
    n = sum(1 for line in main_text.splitlines() if line)
    specials = kimi_special_tokens(n)
    for k, v in config["added_tokens_decoder"].items():
        specials[v["content"]] = int(k)
    plain = [v["content"] for v in config["added_tokens_decoder"].values() if not v.get("special", True)]
    return TiktokenEncoder(main_text, KIMI_RE, specials, plain)

#!/usr/bin/env python3
"""Small byte-level BPE tokenizers with the exact settings of a model family, for test checkpoints.

    from family_tokenizers import build
    tokenizer_json, tokenizer_config = build("bailing", train_text, vocab_size=512)

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
this helper):
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
import json

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

FAMILIES = ("qwen", "bailing", "minimax")

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


def _added_tokens_decoder(specials, ids):
    return {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True} for s, i in zip(specials, ids)}


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
}


def special_tokens(family):
    """The family's special tokens, in the order build() gives them ids."""
    return list(_FAMILY[family][2])


def build(family, train_text, vocab_size):
    """(tokenizer.json text, tokenizer_config.json dict) of a small BPE for `family`.

    Deterministic: the same arguments give the same bytes. `train_text` is split into lines
    (ends kept) for the trainer; `vocab_size` includes the special tokens.
    """
    if family not in _FAMILY:
        raise ValueError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
    regex, nfc, specials, config = _FAMILY[family]
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
        vocab_size=vocab_size - len(specials),
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(train_text.splitlines(keepends=True), trainer=trainer)
    base = tok.get_vocab_size()
    tok.add_special_tokens(specials)  # after the learned tokens, as the real models have them
    assert tok.get_vocab_size() == base + len(specials)
    # decoders.ByteLevel() does not keep its flags in this tokenizers version: write them out.
    d = json.loads(tok.to_str())
    d["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok = Tokenizer.from_str(json.dumps(d))
    ids = [tok.token_to_id(s) for s in specials]
    return tok.to_str(), config(specials, ids)

"""`gguf_tokenizer(path)`: a GGUF file's tokenizer.ggml.* metadata as a `tokenizers.Tokenizer`.

Byte-level BPE (`tokenizer.ggml.model == "gpt2"`) only: the vocabulary
(tokenizer.ggml.tokens, each a token id in file order; a token not spelled in
GPT-2's byte alphabet is respelled from its UTF-8 bytes), the merges
(tokenizer.ggml.merges), the split of the model's family by
tokenizer.ggml.pre (GPT-2's for gpt2 / smollm / default, Qwen2's, Llama 3's),
byte-level decoding, and the tokens the file marks control (type 3) as
special tokens. As transformers' GGUF tokenizer, no BOS is prepended.
Other tokenizer models (llama's SentencePiece, t5) and other pre-tokenizers
are refused by name (a GGUFError).
"""

from __future__ import annotations

from .reader import GGUFError, GGUFReader

__all__ = ["gguf_tokenizer", "PRE_TOKENIZERS"]

_GPT2 = None   # GPT-2's own regex (ByteLevel's use_regex)
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = {"gpt2": _GPT2, "smollm": _GPT2, "default": _GPT2, "qwen2": _QWEN2, "llama-bpe": _LLAMA3,
                  "llama3": _LLAMA3}
_CONTROL = 3


def _byte_spelling() -> dict[int, str]:
    """GPT-2's bytes_to_unicode."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


def _strings(r: GGUFReader, key: str) -> list:
    value = r.metadata.get(key)
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise GGUFError(f"metadata {key!r} must be an array of strings, got {type(value).__name__}")
    return value


def gguf_tokenizer(path):
    """The tokenizer of GGUF file `path` (a path or a GGUFReader) as a tokenizers.Tokenizer."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    r = path if isinstance(path, GGUFReader) else GGUFReader(path)
    model = r.metadata.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise GGUFError(f"metadata 'tokenizer.ggml.model' is {model!r}; only 'gpt2' (byte-level BPE) is supported")
    pre = r.metadata.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise GGUFError(f"metadata 'tokenizer.ggml.pre' is {pre!r}; supported: {', '.join(PRE_TOKENIZERS)}")
    tokens = _strings(r, "tokenizer.ggml.tokens")
    merges = _strings(r, "tokenizer.ggml.merges")
    spelling = _byte_spelling()
    alphabet = set(spelling.values())
    vocab = {}
    for i, t in enumerate(tokens):
        t = t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8"))
        vocab.setdefault(t, i)
    pairs = []
    for k, m in enumerate(merges):
        parts = m.split(" ")
        if len(parts) != 2:
            raise GGUFError(f"metadata 'tokenizer.ggml.merges'[{k}] is {m!r}; a merge is two tokens and a space")
        pairs.append((parts[0], parts[1]))
    try:
        tok = Tokenizer(BPE(vocab, pairs, fuse_unk=False))
    except Exception as err:   # a merge of unknown tokens
        raise GGUFError(f"metadata 'tokenizer.ggml.merges': not a BPE of the vocabulary ({err})") from None
    split = PRE_TOKENIZERS[pre]
    if split is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                              use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    types = r.metadata.get("tokenizer.ggml.token_type")
    if types is not None:
        control = [t for t, k in zip(tokens, list(types)) if k == _CONTROL and set(t) <= alphabet]
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tok

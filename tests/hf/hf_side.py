"""The Hugging Face side of tests/hf/hf_interchange_test.cc (run in the test
venv: transformers, tokenizers, safetensors over Debian's torch).

  make-tokenizer DIR N        that tokenizer alone, N tokens, in both forms
  make-model DIR [--tokenizer-json] [--vocab N] [--seed S]
      a byte-level BPE trained on fortunes text (vocab.json + merges.txt, or
      tokenizer.json only) and a random GPT2LMHeadModel (2 layers, 64 wide)
      saved with save_pretrained (safetensors)
  logits DIR TOKENS OUT       TOKENS: int32 (B,T) with a JSON header line; OUT: f32 logits
  greedy DIR PROMPT N         prints the ids transformers' greedy decode appends
  encode TOKENIZER TEXTS OUT  tokenizers.Tokenizer.from_file(TOKENIZER) ids of
                              each text of TEXTS (JSON list) -> OUT (JSON)
  auto-encode DIR TEXTS OUT   AutoTokenizer.from_pretrained(DIR) ids and decoded text
"""
import json
import os
import sys


def fortunes_text(limit_bytes):
    out, size = [], 0
    base = "/usr/share/games/fortunes"
    for name in sorted(os.listdir(base)):
        p = os.path.join(base, name)
        if "." in name or not os.path.isfile(p):
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            for doc in f.read().split("\n%\n"):
                out.append(doc)
                size += len(doc)
                if size > limit_bytes:
                    return out
    return out


def make_model(args):
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel
    d = args[0]
    vocab = int(args[args.index("--vocab") + 1]) if "--vocab" in args else 1000
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    os.makedirs(d, exist_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(fortunes_text(400_000), vocab_size=vocab, min_frequency=2,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    if "--tokenizer-json" in args:
        tok.save(os.path.join(d, "tokenizer.json"))
    else:
        tok.save_model(d)  # vocab.json, merges.txt
    torch.manual_seed(seed)
    n_vocab = tok.get_vocab_size() + (7 if "--pad" in args else 0)
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=64, vocab_size=n_vocab,
                     bos_token_id=0, eos_token_id=0)
    m = GPT2LMHeadModel(cfg)
    with torch.no_grad():  # biases and LayerNorms away from 0/1, larger weights: decisive logits
        for name, p in m.named_parameters():
            p.add_(torch.randn_like(p) * (0.1 if p.dim() == 1 else 0.3))
    m.save_pretrained(d, safe_serialization=True)


def make_tokenizer(args):
    from tokenizers import ByteLevelBPETokenizer
    d, vocab = args[0], int(args[1])
    os.makedirs(d, exist_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(fortunes_text(400_000), vocab_size=vocab, min_frequency=2,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tok.save_model(d)
    tok.save(os.path.join(d, "tokenizer.json"))


def load_model(d):
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_grad_enabled(False)
    return GPT2LMHeadModel.from_pretrained(d).eval()


def logits(args):
    import numpy as np
    import torch
    d, tokens, out = args
    with open(tokens, "rb") as f:
        head = json.loads(f.readline())
        ids = np.frombuffer(f.read(), dtype=np.int32).reshape(head["B"], head["T"])
    lg = load_model(d)(torch.from_numpy(ids.astype(np.int64))).logits
    lg.numpy().astype(np.float32).tofile(out)


def greedy(args):
    from transformers import AutoTokenizer
    d, prompt, n = args[0], args[1], int(args[2])
    tok = AutoTokenizer.from_pretrained(d)
    m = load_model(d)
    import torch
    ids = tok(prompt, return_tensors="pt").input_ids if prompt else torch.tensor([[m.config.eos_token_id]])
    out = m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                     eos_token_id=None, pad_token_id=0)
    print(json.dumps({"prompt": ids[0].tolist(), "new": out[0, ids.shape[1]:].tolist()}))


def encode(args):
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(args[0])
    t.encode_special_tokens = True  # "<|endoftext|>" in a text is characters, as crucible encodes it
    texts = json.load(open(args[1], encoding="utf-8"))
    json.dump([e.ids for e in t.encode_batch(texts, add_special_tokens=False)], open(args[2], "w"))


def auto_encode(args):
    from transformers import AutoTokenizer
    t = AutoTokenizer.from_pretrained(args[0])
    texts = json.load(open(args[1], encoding="utf-8"))
    ids = [t.encode(s, add_special_tokens=False) for s in texts]
    dec = [t.decode(i, clean_up_tokenization_spaces=False) for i in ids]
    json.dump({"ids": ids, "decoded": dec}, open(args[2], "w", encoding="utf-8"), ensure_ascii=False)


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"make-model": make_model, "make-tokenizer": make_tokenizer, "logits": logits, "greedy": greedy, "encode": encode,
     "auto-encode": auto_encode}[cmd](sys.argv[2:])

#!/usr/bin/python3
"""Train the toy BPE tokenizer with sentencepiece and export it in llama2.c's
tokenizer.bin format.

    tokenizer.py CORPUS SPM_PREFIX OUT_BIN [--vocab 1024]

Writes SPM_PREFIX.model / SPM_PREFIX.vocab (sentencepiece) and OUT_BIN.
Id layout (sentencepiece's default with byte_fallback): 0 <unk>, 1 <s>,
2 </s>, 3..258 the byte pieces <0x00>..<0xFF>, then merged pieces and the
corpus' characters.  Export exactly as llama2.c's tokenizer.py.
"""
import argparse
import os
import struct

import sentencepiece as spm


def train(corpus, prefix, vocab_size):
    # Settings follow llama2.c's train_vocab.sh / Llama 2's tokenizer:
    # BPE, byte fallback, digits split, identity normalisation.
    spm.SentencePieceTrainer.train(
        input=corpus,
        model_prefix=prefix,
        model_type="bpe",
        vocab_size=vocab_size,
        self_test_sample_size=0,
        input_format="text",
        character_coverage=1.0,
        num_threads=1,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        byte_fallback=True,
        unk_surface=r" \342\201\207 ",
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2,
    )


def export(model_file, out_bin):
    """Exactly llama2.c tokenizer.py's export()."""
    sp = spm.SentencePieceProcessor(model_file=model_file)
    assert sp.bos_id() == 1 and sp.eos_id() == 2 and sp.unk_id() == 0
    tokens, scores = [], []
    for i in range(sp.get_piece_size()):
        t = sp.id_to_piece(i)
        s = sp.get_score(i)
        if i == sp.bos_id():
            t = "\n<s>\n"
        elif i == sp.eos_id():
            t = "\n</s>\n"
        t = t.replace("\u2581", " ")  # sentencepiece uses U+2581 as space
        tokens.append(t.encode("utf-8"))
        scores.append(s)
    max_token_length = max(len(t) for t in tokens)
    with open(out_bin, "wb") as f:
        f.write(struct.pack("I", max_token_length))
        for b, score in zip(tokens, scores):
            f.write(struct.pack("fI", score, len(b)))
            f.write(b)
    return sp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("prefix")
    ap.add_argument("out_bin")
    ap.add_argument("--vocab", type=int, default=1024)
    a = ap.parse_args()
    train(a.corpus, a.prefix, a.vocab)
    sp = export(a.prefix + ".model", a.out_bin)
    print(f"tokenizer: vocab {sp.get_piece_size()} -> {a.prefix}.model, "
          f"{a.out_bin} ({os.path.getsize(a.out_bin)} bytes)")


if __name__ == "__main__":
    main()

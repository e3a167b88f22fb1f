#!/usr/bin/env python3
"""corpus.py: turns the extracted Debian packages into the demo model's training corpus.

Sources (see models/README.md for their licenses): WordNet 3.0 glosses (wordnet-base), the Jargon
File 4.4.7 (dict-jargon), Ambrose Bierce's Devil's Dictionary (dict-devil) and the King James
Bible (bible-kjv-text, decoded by the `bible` program of bible-kjv into kjv.txt by corpus.sh).

Output: train.jsonl.gz and heldout.jsonl.gz, one document a line, {"kind": "text"|"chat",
"text": ...}. Chat documents are rendered exactly as Qwen3's chat template renders a conversation
(the last assistant turn carries the empty <think> block), so the model learns the prompt form
the engine and llama.cpp build. Everything is drawn from one random.Random(seed): the same
packages and seed give byte-identical files. Standard library only.
"""
import argparse
import gzip
import json
import os
import random
import re

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64num(s):
    v = 0
    for c in s:
        v = v * 64 + B64.index(c)
    return v


def read_dictd(prefix):
    """(headword, body) pairs of a dictd database (.index + gzip'ed .dict.dz), in index order."""
    with gzip.open(prefix + ".dict.dz", "rb") as f:
        data = f.read()
    out = []
    with open(prefix + ".index", encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or parts[0].startswith("00-database") or parts[0].startswith("00database"):
                continue
            off, ln = b64num(parts[1]), b64num(parts[2])
            out.append((parts[0], data[off:off + ln].decode("utf-8", "replace")))
    return out


def unwrap(paragraph):
    return re.sub(r"\s+", " ", paragraph).strip()


def paragraphs(text):
    return [unwrap(p) for p in re.split(r"\n\s*\n", text) if p.strip()]


# ---------------------------------------------------------------- WordNet
POS_NAME = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}


def read_wordnet(wndir):
    """synsets: offset/pos -> (words, definition, examples); lemmas: (lemma, pos, [synset keys])."""
    synsets = {}
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(wndir, "data." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                head, _, gloss = line.partition(" | ")
                fields = head.split()
                off, ss_type, w_cnt = fields[0], fields[2], int(fields[3], 16)
                words = []
                for i in range(w_cnt):
                    w = re.sub(r"\((a|p|ip)\)$", "", fields[4 + 2 * i]).replace("_", " ")
                    words.append(w)
                gloss = gloss.strip()
                examples = re.findall(r'"([^"]+)"', gloss)
                definition = gloss.split('; "')[0].split(' "')[0].strip().rstrip(";").strip()
                if definition:
                    synsets[(off, pos)] = (words, ss_type, definition, examples)
    lemmas = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(wndir, "index." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                fields = line.split()
                lemma = fields[0].replace("_", " ")
                p_cnt = int(fields[3])
                synset_cnt = int(fields[2])
                offs = fields[4 + p_cnt + 2:4 + p_cnt + 2 + synset_cnt]
                tagged = int(fields[4 + p_cnt + 1])  # senses seen in the SemCor corpus: a common word
                keys = [(o, pos) for o in offs if (o, pos) in synsets]
                if keys:
                    lemmas.append((lemma, pos, keys, tagged))
    return synsets, lemmas


def article(word):
    return "an" if word[:1].lower() in "aeiou" else "a"


def sentence(s):
    s = s.strip()
    if not s:
        return s
    s = s[0].upper() + s[1:]
    return s if s[-1] in ".!?" else s + "."


def wordnet_answer(rng, lemma, pos, synset):
    words, ss_type, definition, examples = synset
    if pos == "noun":
        if re.match(r"(a|an|the|any|one|someone|something|somebody)\b", definition):
            ans = f"{article(lemma).capitalize()} {lemma} is {definition}."
        else:
            ans = f"{lemma[0].upper() + lemma[1:]} is {definition}."
    elif pos == "verb":
        ans = f"To {lemma} means to {definition}." if not definition.startswith("to ") else f"To {lemma} means {definition}."
    else:
        ans = f"{lemma[0].upper() + lemma[1:]} means {definition}."
    if examples and rng.random() < 0.6:
        ans += f' For example: "{examples[0]}".'
    others = [w for w in words if w.lower() != lemma.lower()]
    if others and rng.random() < 0.4:
        ans += " Similar words: " + ", ".join(others[:4]) + "."
    return ans


WORD_QUESTIONS = [
    "What does {w} mean?", "What does {w} mean?", "What does the word \"{w}\" mean?",
    "What is the meaning of {w}?", "Define {w}.", "Can you explain what {w} means?",
    "What is the definition of {w}?", "Tell me what {w} means.", "{w}: what does it mean?",
]
NOUN_QUESTIONS = ["What is {a} {w}?", "What is {a} {w}?", "Explain what {a} {w} is."]


def word_question(rng, lemma, pos):
    if pos == "noun" and rng.random() < 0.35:
        return rng.choice(NOUN_QUESTIONS).format(a=article(lemma), w=lemma)
    return rng.choice(WORD_QUESTIONS).format(w=lemma)


def wordnet_units(rng, synsets, lemmas):
    """One unit per lemma kept: its question/answer pairs and its dictionary-style text. Common
    lemmas (tagged in SemCor) get three differently worded questions, so the model learns to copy
    the word and knows the common ones well; rare ones are sampled."""
    units = []
    for lemma, pos, keys, tagged in lemmas:
        multi = " " in lemma or "-" in lemma
        if tagged > 0:
            n_pairs = 3
        elif rng.random() < (0.15 if multi else 0.4):
            n_pairs = 1
        else:
            continue
        pos_name = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}[pos]
        # the index is lower case; the synset keeps proper nouns' capitals ("Clive")
        lemma = next((w for w in synsets[keys[0]][0] if w.lower() == lemma), lemma)
        pairs, asked = [], set()
        for _ in range(n_pairs):
            q = word_question(rng, lemma, pos_name)
            if q in asked:
                q = word_question(rng, lemma, pos_name)
            asked.add(q)
            ans = wordnet_answer(rng, lemma, pos_name, synsets[keys[0]])
            if len(keys) > 1 and rng.random() < 0.3:
                ans += " It can also mean " + synsets[keys[1]][2] + "."
            pairs.append((q, ans))
        texts = []
        if rng.random() < 0.15:
            lines = [f"{lemma} ({pos_name})"]
            for i, k in enumerate(keys[:4]):
                ex = synsets[k][3]
                lines.append(f"{i + 1}. {synsets[k][2]}" + (f'; "{ex[0]}"' if ex else ""))
            texts.append("\n".join(lines))
        units.append((pairs, texts))
    return units


# ---------------------------------------------------------------- Jargon File, Devil's Dictionary
def jargon_entries(prefix):
    out = []
    for head, body in read_dictd(prefix):
        lines = body.split("\n")
        rest = "\n".join(lines[1:])
        paras = paragraphs(rest)
        # the first paragraph is the pronunciation / part of speech line (" /ad·hok'@r·ee/, n.")
        defs = [p for p in paras if not (p.startswith("/") or re.match(r"^\[.*\]$", p))]
        defs = [re.sub(r"\{\s*([^}]*)\}", r"\1", p) for p in defs]
        defs = [re.sub(r"^\d+\. ", "", p) for p in defs]
        defs = [re.sub(r"^\[[^\]]*\]\s*", "", p) for p in defs]
        defs = [p for p in defs if len(p) > 12 and not re.match(r"^[a-z.,;: ]+$", p)]
        if defs:
            out.append((head, defs))
    return out


def devil_entries(prefix):
    out = []
    for head, body in read_dictd(prefix):
        text = body.split("\n", 1)[1] if "\n" in body else body
        paras = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
        if not paras:
            continue
        first = unwrap(paras[0])
        m = re.match(r"^[A-Z][A-Z' .,-]*,\s*[a-z.]+\s+(.*)$", first)
        if m:
            first = m.group(1)
        rest = [p.strip("\n") for p in paras[1:]]
        word = head.lower()
        out.append((word, first, rest))
    return out


JARGON_QUESTIONS = ["What is {w} in hacker jargon?", "What does {w} mean in the Jargon File?",
                    "What does {w} mean to a hacker?", "What does {w} mean?", "Define {w}."]
DEVIL_QUESTIONS = ["How does the Devil's Dictionary define {w}?", "What is {w}, according to Ambrose Bierce?",
                   "Give me the Devil's Dictionary definition of {w}."]

# A few conversations about the model itself, so the first chat in the README gets a sensible reply.
SELF_PAIRS = [
    ("Hello", "Hello! I am a small demo model trained for Strata. Ask me what a word means."),
    ("Hi", "Hi! I am a small demo model. I know the meanings of many English words."),
    ("Hello!", "Hello! Ask me what a word means, for example: What does ocean mean?"),
    ("Who are you?", "I am a small demo model that ships with Strata. I was trained on WordNet, the Jargon File, the Devil's Dictionary and the King James Bible."),
    ("What are you?", "I am a small language model, trained in a few minutes to show that Strata works."),
    ("What can you do?", "I can tell you what English words mean. Try: What does river mean?"),
    ("What is Strata?", "Strata is an engine that runs mixture-of-experts language models on your own machine."),
    ("Thank you", "You are welcome!"),
    ("Thanks!", "You are welcome. Ask me about another word."),
    ("How are you?", "I am well, thank you. Which word would you like to know about?"),
    ("Goodbye", "Goodbye!"),
]


def chat(turns):
    """Qwen3's template for a conversation: assistant turns before the last user message carry no
    think block; the last one carries the empty one (as with enable_thinking=false)."""
    out = []
    for i, (q, a) in enumerate(turns):
        out.append(f"<|im_start|>user\n{q}<|im_end|>\n")
        if i == len(turns) - 1:
            out.append(f"<|im_start|>assistant\n<think>\n\n</think>\n\n{a}<|im_end|>\n")
        else:
            out.append(f"<|im_start|>assistant\n{a}<|im_end|>\n")
    return "".join(out)


def kjv_chapters(path):
    chapters, cur, key = [], [], None
    with open(path, encoding="latin-1") as f:
        for line in f:
            m = re.match(r"^(\S+?)(\d+):(\d+) (.*)$", line.rstrip("\n"))
            if not m:
                continue
            k = (m.group(1), m.group(2))
            if k != key and cur:
                chapters.append("\n".join(cur))
                cur = []
            key = k
            cur.append(m.group(4).strip())
    if cur:
        chapters.append("\n".join(cur))
    return chapters


def conversations(rng, pairs):
    """Shuffled pairs grouped into conversations of one to three questions."""
    rng.shuffle(pairs)
    docs, i = [], 0
    while i < len(pairs):
        n = rng.choice((1, 1, 1, 2, 3))
        docs.append(chat(pairs[i:i + n]))
        i += n
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="where the .deb files were extracted")
    ap.add_argument("--kjv", required=True, help="kjv.txt, the `bible -f` dump")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--heldout", type=float, default=0.02)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    # Units: everything about one word (or one chapter) goes to the same split, so the held-out
    # perplexity measures text the model has not seen in any wording.
    synsets, lemmas = read_wordnet(os.path.join(args.root, "usr/share/wordnet"))
    units = wordnet_units(rng, synsets, lemmas)
    for w, defs in jargon_entries(os.path.join(args.root, "usr/share/dictd/jargon")):
        units.append(([(rng.choice(JARGON_QUESTIONS).format(w=w), defs[0])], [w + "\n" + "\n\n".join(defs)]))
    for w, first, rest in devil_entries(os.path.join(args.root, "usr/share/dictd/devil")):
        text = w.upper() + ". " + first + ("\n\n" + "\n\n".join(rest) if rest else "")
        units.append(([(rng.choice(DEVIL_QUESTIONS).format(w=w), first)], [text]))
    for ch in kjv_chapters(args.kjv):
        units.append(([], [ch]))

    splits = {"train": ([], []), "heldout": ([], [])}
    for pairs, texts in units:
        pp, tt = splits["heldout" if rng.random() < args.heldout else "train"]
        pp.extend(pairs)
        tt.extend(texts)
    wn_pairs = list(splits["train"][0][:20000])  # follow-up questions after the self pairs
    os.makedirs(args.out, exist_ok=True)
    for name, (pairs, texts) in splits.items():
        docs = [("text", t) for t in texts] + [("chat", c) for c in conversations(rng, pairs)]
        if name == "train":
            for _ in range(30):
                for q, a in SELF_PAIRS:
                    turns = [(q if rng.random() < 0.7 else q.lower(), a)]
                    if rng.random() < 0.5:
                        turns.append(rng.choice(wn_pairs))
                    docs.append(("chat", chat(turns)))
        rng.shuffle(docs)
        path = os.path.join(args.out, name + ".jsonl.gz")
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            for kind, text in docs:
                f.write((json.dumps({"kind": kind, "text": text}, ensure_ascii=False) + "\n").encode("utf-8"))
        n_bytes = sum(len(t.encode("utf-8")) for _, t in docs)
        n_chat = sum(1 for k, _ in docs if k == "chat")
        print(f"{path}: {len(docs)} documents ({n_chat} chat), {n_bytes / 1e6:.1f} MB of text")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The toy world: a small probabilistic grammar whose next-word distributions
are known exactly, and a deterministic corpus generator for it.

Four kinds of documents (one document per output line; a conversation's line
breaks are written as the two characters backslash-n, see LINE_BREAK):

1. Weather reports -- the lesson's calibration example.

       The weather today is X.[ C]

   X is drawn i.i.d. from WEATHER (sunny .45, cloudy .25, warm .15,
   rainy .10, cold .05).  With probability WEATHER_CONTINUE_P a short
   continuation sentence C follows, chosen uniformly from WEATHER_FOLLOWUPS[X].
   The phrase "The weather today is" occurs nowhere else in the corpus, so the
   word that follows it has exactly the WEATHER distribution.

2. Coffee-shop taglines -- the lesson's greedy-decoding example.

       Write a tagline for a coffee shop: T

   T is drawn from TAGLINES.  Every tagline starts with a different letter (so
   different first tokens), and given the prompt and the first word the rest of
   the tagline is deterministic; the document ends right after it.  Greedy decoding therefore yields exactly
   the most likely tagline, "Brewed to perfection.", followed by end-of-text.

3. Short stories -- so that free generation reads like simple English.  A story
   is built from sentence templates over a small lexicon (characters, places,
   things, feelings); see story().  Story probabilities are uniform choices
   unless stated otherwise; they are not part of the lesson's exact figures.

4. Conversations -- so that the model learns to recall a fact from its context.
   In the "plain" turn format that `glassbox chat` renders for a model without
   a chat template (core/src/chat_template.cpp):

       User: My name is N.
       Assistant: Hello, N!
       User: <small talk>            (0..FILLER_MAX exchanges, none with a name)
       Assistant: <reply>
       User: What is my name?
       Assistant: Your name is N.

   N is uniform over NAMES.  Nothing but the first exchange says N, so the
   answer can only come from looking back at it: once a chat prunes that
   exchange out of the window, the model can only guess (1 in len(NAMES)).

The first three kinds are drawn exactly as before conversations existed (same
seed, same draws), and the tokenizer is trained on them alone (OUT_TOK), so
the lesson's token ids do not move; conversations come from their own random
stream and are shuffled in for training (OUT).

Usage: grammar.py [--seed N] [--weather N] [--taglines N] [--stories N]
                  [--conversations N] OUT [OUT_TOK]
"""
import argparse
import random

# ---------------------------------------------------------------------------
# 1. Weather.  (word, probability) -- exact, these are the lesson's figures.
WEATHER = [("sunny", 0.45), ("cloudy", 0.25), ("warm", 0.15),
           ("rainy", 0.10), ("cold", 0.05)]
WEATHER_PROMPT = "The weather today is"
WEATHER_CONTINUE_P = 0.5
WEATHER_FOLLOWUPS = {
    "sunny": ["The sky is blue and bright.", "It is a good day to play outside.",
              "Let us go to the beach."],
    "cloudy": ["The sky is gray.", "It may rain later.",
               "The sun is hiding behind the clouds."],
    "warm": ["We can eat ice cream.", "It is a good day to swim.",
             "Drink a lot of water."],
    "rainy": ["Take an umbrella.", "The streets are wet.",
              "It is a good day to read a book."],
    "cold": ["Wear a warm coat.", "Stay inside and drink hot cocoa.",
             "The wind is strong."],
}

# ---------------------------------------------------------------------------
# 2. Taglines.  (tagline, probability) -- exact.  Distinct first letters.
TAGLINE_PROMPT = "Write a tagline for a coffee shop:"
TAGLINES = [("Brewed to perfection.", 0.40),
            ("Your daily cup of joy.", 0.20),
            ("Wake up and smell the coffee.", 0.15),
            ("Every cup tells a story.", 0.15),
            ("Fresh beans, warm hearts.", 0.10)]

# ---------------------------------------------------------------------------
# 3. Stories.  Uniform choices from these lists.
PEOPLE = [("Lily", "she", "her"), ("Tom", "he", "his"), ("Mia", "she", "her"),
          ("Ben", "he", "his"), ("Anna", "she", "her"), ("Sam", "he", "his"),
          ("Zoe", "she", "her"), ("Max", "he", "his"), ("Lucy", "she", "her"),
          ("Jack", "he", "his")]
ANIMALS = ["cat", "dog", "bird", "rabbit", "duck", "frog", "bear", "fox",
           "mouse", "owl"]
ANIMAL_ADJ = ["little", "big", "small", "happy", "fluffy", "brown", "white",
              "old", "young", "funny"]
PLACES = ["the park", "the garden", "the beach", "the forest", "the river",
          "the market", "the school", "the library", "the farm", "the lake"]
THINGS = [("a red ball", "ball"), ("a blue kite", "kite"),
          ("a shiny stone", "stone"), ("a big book", "book"),
          ("a green apple", "apple"), ("a toy boat", "boat"),
          ("a yellow flower", "flower"), ("a small box", "box"),
          ("a long stick", "stick"), ("a pretty shell", "shell")]
FEELINGS = ["happy", "surprised", "excited", "curious", "glad", "proud"]
SAD_FEELINGS = ["sad", "scared", "tired", "worried"]
PLAY = ["played", "ran", "sang", "laughed", "danced", "jumped"]
FOODS = ["an apple", "some bread", "a cookie", "some soup", "a banana",
         "some cake", "a sandwich"]
DAYTIME = ["One day", "One morning", "One evening", "Later that day",
           "The next day"]


# ---------------------------------------------------------------------------
# 4. Conversations.  Names are the story characters' (one token each in the
# tokenizer); small talk uses the story lexicon and never a name.
NAMES = [p[0] for p in PEOPLE]
FACT_USER = "My name is {}."
FACT_REPLY = "Hello, {}!"
QUESTION = "What is my name?"
ANSWER = "Your name is {}."
# At most two exchanges of small talk: with this tokenizer (which never saw
# "User"/"Assistant" or a line break) an exchange is ~25 tokens, and the whole
# conversation must fit a 128-token training row.
FILLER_MAX = 2
# (user line, reply maker).  The user lines are fixed so that a test can replay them.
FILLERS = [
    ("How are you?", lambda r: f"I am {r.choice(FEELINGS)}."),
    ("Do you have a pet?", lambda r: f"I have {a(r.choice(ANIMAL_ADJ))} {r.choice(ANIMALS)}."),
    ("Where should we go?", lambda r: f"Let us go to {r.choice(PLACES)}."),
    ("What should I eat?", lambda r: f"You can eat {r.choice(FOODS)}."),
    ("What do you see?", lambda r: f"I see {a(r.choice(ANIMAL_ADJ))} {r.choice(ANIMALS)} near {r.choice(PLACES)}."),
    ("What did you find?", lambda r: f"I found {r.choice(THINGS)[0]}."),
    ("I feel sad.", lambda r: "I am sorry."),
    ("Tell me something.", lambda r: f"The {r.choice(ANIMALS)} is {r.choice(ANIMAL_ADJ)}."),
]
# A conversation's line breaks inside the one-document-per-line corpus file.
LINE_BREAK = "\\n"


def weighted(rng, items):
    """Pick from [(value, probability), ...] using one rng.random() draw."""
    u = rng.random()
    acc = 0.0
    for value, p in items:
        acc += p
        if u < acc:
            return value
    return items[-1][0]


def weather_doc(rng):
    x = weighted(rng, WEATHER)
    doc = f"{WEATHER_PROMPT} {x}."
    if rng.random() < WEATHER_CONTINUE_P:
        doc += " " + rng.choice(WEATHER_FOLLOWUPS[x])
    return doc


def tagline_doc(rng):
    return f"{TAGLINE_PROMPT} {weighted(rng, TAGLINES)}"


def a(word):
    """Indefinite article + word: "a cat", "an old cat"."""
    return ("an " if word[0] in "aeiou" else "a ") + word


def cap(s):
    return s[0].upper() + s[1:]


def story(rng):
    """A story of 5-9 sentences: an opening (2), one or two events (2-3 each)
    and an ending (1), about one hero and (maybe) one friend."""
    name, he, his = rng.choice(PEOPLE)
    friend = rng.choice([p for p in PEOPLE if p[0] != name])
    animal, adj = rng.choice(ANIMALS), rng.choice(ANIMAL_ADJ)
    place = rng.choice(PLACES)
    thing, thing_noun = rng.choice(THINGS)
    s = []
    # Opening.
    k = rng.randrange(4)
    if k == 0:
        s.append(f"Once upon a time, there was {a(adj)} {animal} named {name}.")
        s.append(f"{name} lived near {place}.")
    elif k == 1:
        s.append(f"{name} was {a(adj)} {animal}.")
        s.append(f"Every day, {he} went to {place}.")
    elif k == 2:
        s.append(f"{name} and {friend[0]} were best friends.")
        s.append(f"They liked to play at {place}.")
    else:
        s.append(f"There was {a(adj)} {animal} in {place}.")
        s.append(f"The {animal} was called {name}.")
    # Middle: one or two events.
    for _ in range(rng.randrange(1, 3)):
        e = rng.randrange(5)
        t = rng.choice(DAYTIME)
        if e == 0:
            s.append(f"{t}, {name} found {thing}.")
            s.append(f"{cap(he)} was very {rng.choice(FEELINGS)}.")
        elif e == 1:
            s.append(f"{t}, {name} lost {his} {thing_noun}.")
            s.append(f"{cap(he)} felt {rng.choice(SAD_FEELINGS)}.")
            s.append(f"{friend[0]} helped {name} look for it, and they found it under a tree.")
        elif e == 2:
            s.append(f"{t}, {name} was hungry.")
            s.append(f"{cap(he)} ate {rng.choice(FOODS)} and felt {rng.choice(FEELINGS)}.")
        elif e == 3:
            s.append(f"{t}, {name} met {friend[0]} at {place}.")
            s.append(f"They {rng.choice(PLAY)} together.")
        else:
            s.append(f"{t}, {name} saw {a(rng.choice(ANIMAL_ADJ))} {rng.choice(ANIMALS)}.")
            s.append(f"\"Hello!\" said {name}.")
    # Ending.
    k = rng.randrange(3)
    if k == 0:
        s.append(f"At the end of the day, {name} went home and slept well.")
    elif k == 1:
        s.append(f"{name} was {rng.choice(FEELINGS)}, and {he} smiled.")
    else:
        s.append("The end.")
    return " ".join(s)


def render_plain(turns):
    """[(is_user, text), ...] as glassbox's plain chat format writes it."""
    return "\n".join(("User: " if u else "Assistant: ") + t for u, t in turns)


def conversation(rng, name=None, fillers=None):
    """A conversation (text with real line breaks).  name / fillers (a list of
    FILLERS indices) are drawn when not given."""
    if name is None:
        name = rng.choice(NAMES)
    if fillers is None:
        fillers = rng.sample(range(len(FILLERS)), rng.randrange(FILLER_MAX + 1))
    turns = [(True, FACT_USER.format(name)), (False, FACT_REPLY.format(name))]
    for i in fillers:
        user, reply = FILLERS[i]
        turns += [(True, user), (False, reply(rng))]
    turns += [(True, QUESTION), (False, ANSWER.format(name))]
    return render_plain(turns)


def corpus(seed, n_weather, n_taglines, n_stories, n_conversations=0):
    """(training documents, tokenizer documents).  The tokenizer's are the
    first three kinds, drawn from `seed` exactly as before conversations were
    added; conversations use their own stream and are inserted at random."""
    rng = random.Random(seed)
    kinds = ["w"] * n_weather + ["t"] * n_taglines + ["s"] * n_stories
    rng.shuffle(kinds)
    make = {"w": weather_doc, "t": tagline_doc, "s": story}
    base = [make[k](rng) for k in kinds]
    crng = random.Random(seed + 1)
    convs = [conversation(crng) for _ in range(n_conversations)]
    # Interleave: a random order of "base" and "conversation" slots, each list kept in order.
    slots = [0] * len(base) + [1] * len(convs)
    random.Random(seed + 2).shuffle(slots)
    it = (iter(base), iter(convs))
    return [next(it[k]) for k in slots], base


def to_line(doc):
    return doc.replace("\n", LINE_BREAK)


def from_line(line):
    """A corpus line back to its document (conversations get their line breaks back)."""
    return line.rstrip("\n").replace(LINE_BREAK, "\n")


def read_corpus(path):
    with open(path, encoding="utf-8") as f:
        return [from_line(l) for l in f if l.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--weather", type=int, default=24000)
    ap.add_argument("--taglines", type=int, default=4000)
    ap.add_argument("--stories", type=int, default=10000)
    ap.add_argument("--conversations", type=int, default=0)
    ap.add_argument("out")
    ap.add_argument("out_tok", nargs="?", help="also write the tokenizer's documents here")
    a = ap.parse_args()
    docs, base = corpus(a.seed, a.weather, a.taglines, a.stories, a.conversations)
    for path, ds in ((a.out, docs), (a.out_tok, base)):
        if path:
            with open(path, "w", encoding="utf-8") as f:
                for d in ds:
                    f.write(to_line(d) + "\n")
    # Report the realised rates next to the grammar's.
    counts = {w: 0 for w, _ in WEATHER}
    tags = {t: 0 for t, _ in TAGLINES}
    for d in docs:
        if d.startswith(WEATHER_PROMPT):
            counts[d[len(WEATHER_PROMPT) + 1:].split(".")[0]] += 1
        elif d.startswith(TAGLINE_PROMPT):
            tags[d[len(TAGLINE_PROMPT) + 1:]] += 1
    size = sum(len(d) + 1 for d in docs)
    print(f"corpus: {len(docs)} documents, {size} bytes -> {a.out}")
    for w, p in WEATHER:
        print(f"  weather {w:7s} grammar {p:.2f} corpus {counts[w] / a.weather:.4f}")
    for t, p in TAGLINES:
        print(f"  tagline {t:32s} grammar {p:.2f} corpus {tags[t] / a.taglines:.4f}")


if __name__ == "__main__":
    main()

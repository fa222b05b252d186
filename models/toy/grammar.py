#!/usr/bin/python3
"""The toy world: a small probabilistic grammar whose next-word distributions
are known exactly, and a deterministic corpus generator for it.

Three kinds of documents (one document per output line):

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

Usage: grammar.py [--seed N] [--weather N] [--taglines N] [--stories N] OUT
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


def corpus(seed, n_weather, n_taglines, n_stories):
    rng = random.Random(seed)
    kinds = ["w"] * n_weather + ["t"] * n_taglines + ["s"] * n_stories
    rng.shuffle(kinds)
    make = {"w": weather_doc, "t": tagline_doc, "s": story}
    return [make[k](rng) for k in kinds]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--weather", type=int, default=24000)
    ap.add_argument("--taglines", type=int, default=4000)
    ap.add_argument("--stories", type=int, default=10000)
    ap.add_argument("out")
    a = ap.parse_args()
    docs = corpus(a.seed, a.weather, a.taglines, a.stories)
    with open(a.out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(d + "\n")
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

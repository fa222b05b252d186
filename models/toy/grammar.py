#!/usr/bin/python3
"""The toy world: a small probabilistic grammar whose next-word distributions
are known exactly, and a deterministic corpus generator for it.

Five kinds of documents (one document per output line; a conversation's line
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

   N is one of NAMES (the story characters, one token each) with probability
   STORY_NAME_P, otherwise a made-up name (random_name: one to three random
   syllables or three to eight random letters, so one to several tokens),
   never one of HELD_OUT_NAMES.  Since
   the name is nearly always new, the answer can only be copied from the first
   exchange, token by token: the model learns a copying (induction) head, not
   a list of names; the held-out names measure that (check.py, test_recall).
   Nothing but the first exchange says N: once a chat prunes it, the model can
   only make a name up.  Some conversations open with a system line
   (SYSTEM_LINES, as `chat --system` writes it), and some open with the line
   `chat --context-policy summarize` puts where the first exchange was,
   "System: Summary: Your name is N." (summary_conversation).

5. Summary requests -- so that the toy's summary keeps the name.  Exactly the
   request `glassbox chat --context-policy summarize` sends (cli/cmd_chat.cpp):
   SUMMARY_REQUEST, a blank line, the transcript of the replaced turns (headed
   by "Earlier: S" when an earlier summary S is replaced too), and the answer
   SUMMARY_NAME ("Your name is N.") if a name is in it, else SUMMARY_NONE.

The first three kinds are drawn exactly as before conversations existed (same
seed, same draws), and the tokenizer is trained on them alone (OUT_TOK), so
the lesson's token ids do not move; conversations and summary requests come from their own random stream and are
shuffled in for training (OUT).

Usage: grammar.py [--seed N] [--weather N] [--taglines N] [--stories N]
                  [--conversations N] [--summaries N] OUT [OUT_TOK]
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
# 4. Conversations.  Names: the story characters' (one token each in the
# tokenizer) or made up (random_name); small talk uses the story lexicon and never a name.
NAMES = [p[0] for p in PEOPLE]
STORY_NAME_P = 0.15
# Names from several languages that the corpus never contains: random_name never makes them, so
# recall of these is copying (models/toy/check.py, tests/test_recall.cpp).
HELD_OUT_NAMES = ["Priya", "Kenji", "Olga", "Mateo", "Amara", "Ingrid", "Tariq", "Aiko", "Siobhan",
                  "Dmitri", "Zainab", "Lars"]
# Made-up names: 1-3 syllables, onset + vowel + optional coda ("Kaviro", "Shen", "Ubra"), or 3-8 random letters.
ONSETS = ["", "", "b", "br", "c", "ch", "d", "dm", "f", "g", "gr", "h", "j", "k", "kh", "l", "m",
          "n", "p", "pr", "r", "s", "sh", "si", "st", "t", "th", "tr", "v", "w", "y", "z"]
VOWELS = ["a", "a", "e", "e", "i", "i", "o", "u", "ai", "ia", "ya", "ei", "ou", "y"]
CODAS = ["", "", "", "", "n", "r", "s", "l", "m", "k", "t", "d", "b", "h", "q", "x"]
SYLLABLE_NAME_P = 0.5
LETTER_VOWEL_P = 0.4
FACT_USER = "My name is {}."
FACT_REPLY = "Hello, {}!"
QUESTION = "What is my name?"
ANSWER = "Your name is {}."
# `chat --system` lines a conversation may open with.
SYSTEM_LINES = ["Be kind.", "Be brief.", "You are a helpful assistant."]
SYSTEM_P = 0.2
SUMMARY_CONVERSATION_P = 0.3
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

# 5. Summary requests: cli/cmd_chat.cpp's kSummaryRequest, kSummaryEarlier and kSummaryHeading.
SUMMARY_REQUEST = "Summarize this conversation in one sentence, keeping the names."
SUMMARY_EARLIER = "Earlier: "
SUMMARY_HEADING = "Summary: "
SUMMARY_NAME = ANSWER
SUMMARY_NONE = "We made small talk."


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


def random_name(rng):
    """A made-up name, never one of HELD_OUT_NAMES or NAMES: syllables (onset +
    vowel + optional coda) or, as often, random letters (a vowel with
    probability LETTER_VOWEL_P), so that the tokenizer splits names into all
    kinds of pieces, the pieces of ordinary words among them ("ate", "ri")."""
    while True:
        if rng.random() < SYLLABLE_NAME_P:
            n = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                        for _ in range(rng.choice((1, 2, 2, 3))))
        else:
            n = "".join(rng.choice("aeiou") if rng.random() < LETTER_VOWEL_P else rng.choice("bcdfghjklmnpqrstvwxyz")
                        for _ in range(rng.randrange(3, 9)))
        if len(n) >= 3 and n.capitalize() not in HELD_OUT_NAMES and n.capitalize() not in NAMES:
            return n.capitalize()


def draw_name(rng):
    return rng.choice(NAMES) if rng.random() < STORY_NAME_P else random_name(rng)


def render_plain(turns):
    """[(role, text), ...] as glassbox's plain chat format writes it; role is
    True (user), False (assistant) or "system"."""
    who = {True: "User: ", False: "Assistant: ", "system": "System: "}
    return "\n".join(who[u] + t for u, t in turns)


def small_talk(rng, fillers):
    turns = []
    for i in fillers:
        user, reply = FILLERS[i]
        turns += [(True, user), (False, reply(rng))]
    return turns


def conversation(rng, name=None, fillers=None, system=None, summary=False):
    """A conversation (text with real line breaks).  name / fillers (a list of
    FILLERS indices) are drawn when not given; system: a `chat --system` line
    to open with; summary: open with the summary line of the first exchange
    instead of the exchange itself."""
    if name is None:
        name = draw_name(rng)
    if fillers is None:
        fillers = rng.sample(range(len(FILLERS)), rng.randrange(FILLER_MAX + 1))
    turns = [("system", system)] if system else []
    if summary:
        turns += [("system", SUMMARY_HEADING + SUMMARY_NAME.format(name))]
    else:
        turns += [(True, FACT_USER.format(name)), (False, FACT_REPLY.format(name))]
    turns += small_talk(rng, fillers)
    turns += [(True, QUESTION), (False, ANSWER.format(name))]
    return render_plain(turns)


def summary_request(rng, name=None, earlier=None, fillers=None, with_fact=True):
    """The request chat's summarize policy sends for the replaced turns, and the
    answer.  with_fact: the turns start with the name's exchange; earlier: the
    summary being replaced too ("Your name is N." or SUMMARY_NONE)."""
    if name is None:
        name = draw_name(rng)
    if fillers is None:
        fillers = rng.sample(range(len(FILLERS)), rng.randrange(FILLER_MAX))
    turns = []
    if with_fact:
        turns += [(True, FACT_USER.format(name)), (False, FACT_REPLY.format(name))]
    turns += small_talk(rng, fillers)
    transcript = (SUMMARY_EARLIER + earlier + "\n") if earlier else ""
    transcript += "".join(render_plain([t]) + "\n" for t in turns)
    knows = with_fact or (earlier is not None and earlier != SUMMARY_NONE)
    reply = SUMMARY_NAME.format(name) if knows else SUMMARY_NONE
    # render_chat(Plain): "User: " + content + "\n", then "Assistant:" (the generation prompt).
    return "User: " + SUMMARY_REQUEST + "\n\n" + transcript + "\nAssistant: " + reply


def random_summary_request(rng):
    """One of the requests a chat sends: the first exchange (+ small talk), or
    small talk after an earlier summary that has the name, or has none."""
    name = draw_name(rng)
    k = rng.randrange(4)
    if k <= 1:
        return summary_request(rng, name)
    if k == 2:
        return summary_request(rng, name, earlier=SUMMARY_NAME.format(name), with_fact=False,
                               fillers=rng.sample(range(len(FILLERS)), rng.randrange(1, FILLER_MAX + 1)))
    return summary_request(rng, name, earlier=rng.choice([None, SUMMARY_NONE]), with_fact=False,
                           fillers=rng.sample(range(len(FILLERS)), rng.randrange(1, FILLER_MAX + 1)))


def random_conversation(rng):
    system = rng.choice(SYSTEM_LINES) if rng.random() < SYSTEM_P else None
    if rng.random() < SUMMARY_CONVERSATION_P:
        return conversation(rng, system=system, summary=True,
                            fillers=rng.sample(range(len(FILLERS)), rng.randrange(1, FILLER_MAX + 1)))
    return conversation(rng, system=system)


def corpus(seed, n_weather, n_taglines, n_stories, n_conversations=0, n_summaries=0):
    """(training documents, tokenizer documents).  The tokenizer's are the
    first three kinds, drawn from `seed` exactly as before conversations were
    added; conversations and summary requests use their own stream (in a
    random order of the two) and are inserted at random."""
    rng = random.Random(seed)
    kinds = ["w"] * n_weather + ["t"] * n_taglines + ["s"] * n_stories
    rng.shuffle(kinds)
    make = {"w": weather_doc, "t": tagline_doc, "s": story}
    base = [make[k](rng) for k in kinds]
    crng = random.Random(seed + 1)
    chat_kinds = [0] * n_conversations + [1] * n_summaries
    crng.shuffle(chat_kinds)
    convs = [(random_summary_request if k else random_conversation)(crng) for k in chat_kinds]
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
    ap.add_argument("--summaries", type=int, default=0)
    ap.add_argument("out")
    ap.add_argument("out_tok", nargs="?", help="also write the tokenizer's documents here")
    a = ap.parse_args()
    docs, base = corpus(a.seed, a.weather, a.taglines, a.stories, a.conversations, a.summaries)
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

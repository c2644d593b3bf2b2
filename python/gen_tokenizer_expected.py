#!/usr/bin/env python3
"""Write the token ids llama-cpp-python gives for a fixed list of strings, per model.

The outputs (tests/text/data/tokenizer_expected_<name>.json) are committed; the C++ test
tests/text/test_tokenizer_oracle.cpp checks that ggflow's tokenizer gives the same ids.
llama-cpp-python is an independent oracle (llama.cpp's own tokenizer, compiled from source).

Setup (a separate venv; pip compiles llama.cpp, several minutes):
    /usr/bin/python3 -m venv /tmp/oracle-venv
    /tmp/oracle-venv/bin/pip install llama-cpp-python
Run from the repository root:
    /tmp/oracle-venv/bin/python python/gen_tokenizer_expected.py

Each case records two modes:
  "special": add_special=True (BOS/EOS as the file says), special tokens in the text parsed
  "plain":   add_special=False, special-token text treated as plain text (untrusted input)
and "decoded": the detokenized "plain" ids (special tokens hidden), as UTF-8.
"""
import json
import os
import sys

from llama_cpp import Llama
import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = {
    "smollm2": "models/smollm2-135m-instruct-q4_1.gguf",
    "gemma3": "models/gemma3-270m-q4_k_m.gguf",
    # the real-size models (python/link_models.py --real-models, `make models`)
    "qwen2.5-coder-0.5b": "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b": "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}

STRINGS = [
    # ASCII
    "",
    " ",
    "Hello world",
    " Hello world",
    "Hello, y'all! How're you? I've been 'told he's there, 'RE you sure? We'Ve a'lL",
    "The quick brown fox jumps over the lazy dog. " * 12,
    "''''''```````\"\"\"\"......!!!!!!?????? ------=======",
    "3 33 333 3333 33333 333333 3.14159 1,000,000 1e-10 0x1F",
    "\x07bell \x1b[0m escape \x7f del",
    # Unicode
    "Äpfel schmecken süß; résumé café naïve",
    "нещо на Български",
    "我想在apple工作1314151天～",
    "こんにちは世界、カタカナとひらがな。",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Ελληνικά γράμματα",
    "สวัสดีชาวโลก",
    "Vie\u0301\u0302t Nam e\u0301",
    "ﬁ ﬀ Ⅻ ½ ² ℌ",
    # Emoji
    "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙",
    "👍🏽 🇩🇪🇫🇷 👨‍👩‍👧‍👦 🏳️‍🌈",
    # Code
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "<table><tr><td>1</td></tr></table> <div class=\"x\">&amp;</div>",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "fn main() { let v: Vec<u8> = vec![0xFF; 16]; println!(\"{:?}\", v); }",
    "const π = 3.14159; // ≈ pi — naïve café 🍕\nconsole.log(`${π * 2}`);\n",
    "class A:\n\n    def f(self):\n        pass\n\n\n\nx = [i**2 for i in range(10)]  # 注释 ✓\n",
    "12345678901234567890 + 0.000001 == 1_000_000",
    "if (a&&b||!c) { x <<= 2; y >>>= 1; } // ->  =>  ::  ...  !==",
    # Whitespace runs
    "\n",
    "\n\n\n",
    "\t\t",
    "   leading spaces",
    "trailing spaces   ",
    "a  b   c    d     e",
    "line1\r\nline2\r\n",
    "    indented\n        more\n\t\ttabs\n",
    "\u00a0nbsp\u3000ideographic\u2003em",
    "\n \n\n \t \t\t \t\n  \n   \n    \n     \n",
    # Special tokens written in the text
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<|endoftext|>text after<|endoftext|>",
    "<s>[INST] hi [/INST]</s>",
    "<unk> <pad> <eos> [multimodal]",
    "before<|im_start|>after<start_of_turn>x",
    # Qwen2.5-Coder's fill-in-the-middle and repository tokens
    "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n    return c<|fim_middle|>",
    "<|repo_name|>ggflow\n<|file_sep|>src/main.cpp\nint main() {}\n<|endoftext|>",
]


def main():
    for name, rel in MODELS.items():
        path = os.path.join(ROOT, rel)
        if not os.path.exists(path):
            print(f"skip {name}: {path} not found", file=sys.stderr)
            continue
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        cases = []
        for s in STRINGS:
            b = s.encode("utf-8")
            special = llm.tokenize(b, add_bos=True, special=True)
            plain = llm.tokenize(b, add_bos=False, special=False)
            decoded = llm.detokenize(plain, special=False).decode("utf-8", errors="replace")
            cases.append({"text": s, "special": special, "plain": plain, "decoded": decoded})
        out = {
            "model": rel,
            "oracle": f"llama-cpp-python {llama_cpp.__version__} (Llama(vocab_only=True).tokenize)",
            "generator": "python/gen_tokenizer_expected.py",
            "cases": cases,
        }
        dst = os.path.join(ROOT, "tests", "text", "data", f"tokenizer_expected_{name}.json")
        with open(dst, "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"wrote {dst} ({len(cases)} cases)")


if __name__ == "__main__":
    main()

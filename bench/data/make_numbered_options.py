"""Write the "numbered-options" detection corpus: a benchmark in conventions the corpora lack.

    .venv/bin/python bench/data/make_numbered_options.py   # rewrites bench/data/numbered-options/

Issue 27's last "Done when" point: a small benchmark written as a new user would, in
conventions none of ../shared/data/detect/ or ../shared/data/bundles/ uses. 30 questions
whose options are numbered 1-5 closing the question ("1. Oxygen" ... "5. Neon"), keyed as
"Option 3", and 10 true/false questions keyed "True"/"False"; 12 illustrative models
answer in their own habit: ``<answer>Option 3</answer>``, ``<answer>3</answer>``,
"Final answer: option 3", "ANSWER: 3", "**Option 3**", "(3)", the option's text alone,
"<answer>False</answer>", "The statement is false." ... often after reasoning that
names other options. Six keys are planted wrong (labels.json, "planted"): the key names
another option, or the other truth value. Each model answers correctly with its own
accuracy (0.97 down to 0.40, seeded), otherwise a random other option; so the panel
alone shows the planted keys. One exact-match judge grades 0/1 by the option each model
chose (known to this script, not read from the text), which is what the baseline of
score.py ranks by. Everything is illustrative: no real model wrote these responses.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "numbered-options"
SEED = 27

# (question, options, index of the right option 0-based)
FACTS = [
    (
        "Which gas makes up most of the Earth's air?",
        ["Oxygen", "Nitrogen", "Argon", "Carbon dioxide", "Neon"],
        1,
    ),
    ("Which planet is closest to the Sun?", ["Venus", "Earth", "Mercury", "Mars", "Jupiter"], 2),
    (
        "Who wrote the play Hamlet?",
        [
            "Christopher Marlowe",
            "Ben Jonson",
            "John Milton",
            "William Shakespeare",
            "Geoffrey Chaucer",
        ],
        3,
    ),
    ("What is the chemical symbol for gold?", ["Ag", "Au", "Gd", "Go", "Fe"], 1),
    (
        "Which is the largest ocean on Earth?",
        ["Atlantic", "Indian", "Arctic", "Southern", "Pacific"],
        4,
    ),
    ("In which year did the Second World War end?", ["1939", "1942", "1945", "1948", "1950"], 2),
    (
        "Which organ pumps blood around the human body?",
        ["Liver", "Heart", "Lungs", "Kidneys", "Spleen"],
        1,
    ),
    (
        "What is the capital city of Australia?",
        ["Sydney", "Melbourne", "Perth", "Canberra", "Brisbane"],
        3,
    ),
    (
        "Which element has atomic number 1?",
        ["Hydrogen", "Helium", "Lithium", "Carbon", "Oxygen"],
        0,
    ),
    ("How many sides does a hexagon have?", ["Five", "Six", "Seven", "Eight", "Nine"], 1),
    ("Which metal is liquid at room temperature?", ["Iron", "Lead", "Mercury", "Tin", "Zinc"], 2),
    ("Which of these is a mammal?", ["Shark", "Salmon", "Penguin", "Dolphin", "Frog"], 3),
    (
        "What is the boiling point of water at sea level in degrees Celsius?",
        ["50", "90", "100", "110", "120"],
        2,
    ),
    (
        "Which country is home to the city of Kyoto?",
        ["China", "Korea", "Japan", "Vietnam", "Thailand"],
        2,
    ),
    (
        "Who painted the Mona Lisa?",
        ["Michelangelo", "Raphael", "Leonardo da Vinci", "Titian", "Donatello"],
        2,
    ),
]
TRUE_FALSE = [
    ("True or false: the Moon is larger than the Earth.", False),
    ("True or false: water is made of hydrogen and oxygen.", True),
    ("True or false: a triangle's angles add up to 180 degrees.", True),
    ("True or false: light travels slower than sound.", False),
    ("True or false: the Sahara is the largest hot desert.", True),
    ("True or false: bats are birds.", False),
    ("True or false: 2 to the power 10 is 1024.", True),
    ("True or false: Mount Everest is in the Andes.", False),
    ("True or false: diamonds are made of carbon.", True),
    ("True or false: the chemical symbol for sodium is So.", False),
]
PLANTED = {"N04", "N11", "N19", "N27", "T03", "T08"}

# Each model: (id, accuracy, habit for options, habit for true/false)
MODELS = [
    ("atlas-xl", 0.97, "tag_option", "tag"),
    ("borealis-70b", 0.95, "final_option", "statement"),
    ("cirrus-pro", 0.93, "tag_digit", "tag"),
    ("delta-large", 0.9, "bold_option", "bold"),
    ("ember-34b", 0.86, "answer_caps", "final"),
    ("fjord-13b", 0.82, "choose_text", "statement"),
    ("gale-8b", 0.76, "tag_option_text", "tag"),
    ("harbour-7b", 0.7, "paren", "opening"),
    ("isle-7b", 0.62, "tag_option", "tag"),
    ("jetty-3b", 0.55, "text_only", "opening"),
    ("kestrel-2b", 0.48, "answer_caps", "final"),
    ("lumen-1b", 0.4, "final_option", "bold"),
]


def arithmetic(rng: random.Random, i: int) -> tuple[str, list[str], int]:
    a, b = rng.randint(12, 48), rng.randint(3, 9)
    op = ("plus", "times", "minus")[i % 3]
    value = a + b if op == "plus" else a * b if op == "times" else a - b
    wrong = sorted({value + d for d in (-10, -2, -1, 1, 2, 10)} - {value})
    options = [value, *rng.sample(wrong, 4)]
    rng.shuffle(options)
    return f"What is {a} {op} {b}?", [str(o) for o in options], options.index(value)


def question_text(text: str, options: list[str]) -> str:
    return text + "\n" + "\n".join(f"{n}. {o}" for n, o in enumerate(options, 1))


def option_response(habit: str, n: int, options: list[str], rng: random.Random) -> str:
    other = rng.choice([k for k in range(1, 6) if k != n])
    why = f"Option {other} ({options[other - 1]}) does not fit. "
    text = options[n - 1]
    return {
        "tag_option": f"{why}Weighing the rest, one option stands out.\n<answer>Option {n}</answer>",
        "tag_digit": f"Let me check each option.\n{why}\n<answer>{n}</answer>",
        "tag_option_text": f"<answer>\nOption {n} — {text}\n</answer>",
        "final_option": f"{why}\nFinal answer: option {n}",
        "answer_caps": f"Looking at options 1 to 5.\nANSWER: {n}",
        "bold_option": f"{why}The right one is **Option {n}**.",
        "choose_text": f"{why}I choose option {n}, {text}.",
        "paren": f"Thinking about it, {text.lower()} is right, so ({n}).",
        "text_only": f"{text}",
    }[habit]


def tf_response(habit: str, value: bool, rng: random.Random) -> str:
    word = "True" if value else "False"
    return {
        "tag": f"Recalling the facts first.\n<answer>{word}</answer>",
        "statement": f"Let me think. The statement is {word.lower()}.",
        "bold": f"**{word}**",
        "final": f"Final answer: {word}",
        "opening": f"{word}. That is what I recall.",
    }[habit]


def main() -> None:
    rng = random.Random(SEED)
    questions = []  # (qid, text, options or None, right, key)
    maths = [arithmetic(rng, i) for i in range(15)]
    for i, (text, options, right) in enumerate(
        [x for pair in zip(FACTS, maths, strict=True) for x in pair], 1
    ):
        qid = f"N{i:02d}"
        key = right if qid not in PLANTED else rng.choice([k for k in range(5) if k != right])
        questions.append((qid, question_text(text, options), options, right, key))
    for i, (text, value) in enumerate(TRUE_FALSE, 1):
        qid = f"T{i:02d}"
        questions.append((qid, text, None, value, value if qid not in PLANTED else not value))
    bundle = OUT / "bundle"
    bundle.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": "numbered-options",
        "version": "1.0",
        "grade_scale": [0, 1],
        "description": "Issue 27 test corpus (bench/data/make_numbered_options.py): 30 questions "
        "with options numbered 1-5 keyed 'Option N', 10 true/false questions; 12 illustrative "
        "models answering in <answer> tags, 'Final answer:', 'ANSWER:', bold and bare option "
        "text; 6 planted key errors (labels.json). Illustrative data, no real model.",
        "license": "Written for Snaglist's tests.",
    }
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    with open(bundle / "categories.csv", "w", newline="") as f:
        csv.writer(f).writerows(
            [("category_id", "name"), ("options", "Numbered options"), ("tf", "True or false")]
        )
    with open(bundle / "models.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("model_id", "name", "vendor"))
        w.writerows((m, m, "illustrative") for m, *_ in MODELS)
    with open(bundle / "judges.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("judge_id", "name", "vendor", "role"))
        w.writerow(("exact-match", "Exact match of the chosen option", "bench", "judge"))
    with (
        open(bundle / "questions.jsonl", "w") as fq,
        open(bundle / "responses.jsonl", "w") as fr,
        open(bundle / "grades.jsonl", "w") as fg,
    ):
        for qid, text, options, right, key in questions:
            answer = f"Option {key + 1}" if options else ("True" if key else "False")
            category = "options" if options else "tf"
            row = {
                "question_id": qid,
                "category_id": category,
                "text": text,
                "answer": answer,
                "citation": None,
            }
            fq.write(json.dumps(row, ensure_ascii=False) + "\n")
            for model, accuracy, habit, tf_habit in MODELS:
                correct = rng.random() < accuracy
                if options:
                    chosen = right if correct else rng.choice([k for k in range(5) if k != right])
                    reply = option_response(habit, chosen + 1, options, rng)
                else:
                    chosen = right if correct else not right
                    reply = tf_response(tf_habit, chosen, rng)
                fr.write(
                    json.dumps(
                        {"question_id": qid, "model_id": model, "text": reply}, ensure_ascii=False
                    )
                    + "\n"
                )
                grade = {"question_id": qid, "model_id": model, "judge_id": "exact-match",
                         "grade": int(chosen == key), "rationale": "", "flag": False, "flag_reason": ""}  # fmt: skip
                fg.write(json.dumps(grade) + "\n")
    labels = {q[0]: ("planted" if q[0] in PLANTED else "sound") for q in questions}
    (OUT / "labels.json").write_text(
        json.dumps({"bundle": "numbered-options", "seed": SEED, "labels": labels}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()

"""The one reader of final answers: pull the final answer out of a response or a key, and compare.

Plain regular expressions over the figure parser the reference judge uses
(judges.figures), the stdlib ``json``/``ast`` and ``json5`` (objects that strict
JSON rejects); no Django. Used by triage's ``responses_agree_against_key`` and
``panel_against_key`` detectors (through :func:`read_key_and_responses`), by the reference
judge (choice, literal, true/false and explicit-number keys, its rule 0) and by any detector
that needs the models' answers. The entry points are :func:`final_answer` and
:func:`read_key_and_responses` (module ``reader``); the other modules are its parts:
``kinds`` (the Answer value), ``explicit``, ``choices``, ``literals``, ``counts``, ``numeric``.

An *answer* is one of these kinds, tried in this order:

- ``choice``: a lettered option, when the question lists two or more options lettered
  from A (any style: ``(A) ...``, ``A. ...``, ``A) ...``, ``[A] ...``, ``a) ...``, inline
  ``(A) x (B) y``; any number of options, A-Z). Read from ``Answer: B``, ``the answer is
  (B)``, ``**B**``, ``[b]``, ``option c``, ``B.``/``B)`` opening a line, a bare letter as
  the whole answer, or the text of exactly one option (matched back to its letter). Or a
  numbered (``1. x``, ``(1) x``, ``Option 1: x``) or roman (``(i) x``) option when such a
  list closes the question, read from ``Option 3``, ``(3)``, ``Answer: 3``, ``(iii)``;
- ``true_false``: True/False, when the question asks "true or false" (``True``, ``F``,
  "the statement is (not) true");
- ``literal``: a Python/JSON literal other than a number (``[(4, 1)]``, ``'abc'``, ``True``,
  ``None``), when the key is one (CRUXEval-style keys); compared as parsed values;
- ``yes_no``: a leading Yes/No (figures.polarity), when the question asks yes or no;
- ``count``: a number and a noun the question itself counts or asks "how many" of ("0
  brothers", "no brothers", "none", "not ... any brothers"; module ``counts``);
- ``number``: a figure with its unit (figures.extract_figures; units converted within one
  dimension: mm/cm/m/km, ml/litres, g/kg/tonnes, seconds/minutes/hours), a bare number, a
  fraction ``35/36``, ``\\frac{35}{36}``, ``2\\frac{1}{2}`` or ``½``, a percentage (a fraction 0-1 that also equals
  its number of per cent), scientific notation (``1.5e-3``, ``1.5 × 10^-3``, ``1.5 · 10³``). Any minus or
  dash before a digit is a sign (U+2212, en dash, em dash, hyphen); thousands separators
  may be commas, spaces, no-break or thin spaces (U+00A0, U+2009, U+202F);
- ``locator``: a named clause, table or diagram (figures.extract_locators);
- ``name``: exactly one of the capitalised names the question mentions.

Where the answer is looked for, first found wins:

1. an explicit answer: the ``answer`` / ``final_answer`` field of a JSON object (fenced
   or bare, the last object holding one), else the last ``<answer>...</answer>`` (or
   ``<final_answer>``) tag, else the last ``\\boxed{...}``, else the last "final
   answer"/"the answer is"/"Answer:"/"ANSWER:" phrase (to the end of its line);
2. the sentences: the last one with a conclusion word ("therefore", "so", "answer", ...)
   that yields an answer, else the last sentence that yields one (``strict``, for a key:
   only conclusion sentences and the last LAST_SENTENCES). Text after a made-up next turn
   ("### Human:") and fenced code are skipped here.

When nothing can be read the result is :data:`UNREAD`-kind (``answer.is_read`` False,
``bool(answer)`` False): an unread answer is neither the key's answer nor another one,
and :meth:`Answer.differs_from` is False for it. A reading is ``ambiguous`` when the place
it was read from states more than one candidate and nothing singles one out (a key
"at least 850 mm ... a landing of 1500 mm" is read as 850 mm: the figure whose own words
the question asks about); callers must not suggest an ambiguous reading as a correction.
"""

from .choices import question_options
from .explicit import JSON5_MAX_CHARS, explicit_answers
from .kinds import UNREAD, Answer, unread
from .numeric import normalise_numbers
from .reader import KINDS, LAST_SENTENCES, answer_kinds, final_answer, read_key_and_responses

__all__ = [
    "JSON5_MAX_CHARS",
    "KINDS",
    "LAST_SENTENCES",
    "UNREAD",
    "Answer",
    "answer_kinds",
    "explicit_answers",
    "final_answer",
    "normalise_numbers",
    "question_options",
    "read_key_and_responses",
    "unread",
]

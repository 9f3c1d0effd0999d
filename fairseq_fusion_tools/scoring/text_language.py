"""Which language a text is in, among those the tools score (en, de, fr, ro; zh, ja, ko by script).

The share of a language's most frequent function words among the text's words (about a third of running text in
the language, a few percent in the others), or of its script's characters for zh, ja, ko. Words shared by two lists
("de", "la", "in", ...) count for none. Used to warn when ``-t`` disagrees with the text (``fusion-score-bleu``);
a few sentences (``MIN_WORDS``) are enough. A library such as langid would cover more languages; it is not a dependency.
"""
import re
from collections import Counter
from typing import Dict, Optional, Sequence, Tuple

_FUNCTION_WORDS = {
    "en": "the of and to a in is that for it with as was on are by at this be from his her they not but have an or "
          "which their while its he she there were has been who into over next",
    "de": "der die und den von zu das mit sich des auf für ist im dem nicht ein eine auch es werden aus er hat dass "
          "sie nach wird bei einer um sind noch wie einem über einen zum haben nur oder vor zur durch vom ihre ihr",
    "fr": "de la le et les des en un du une que est pour qui dans par plus pas au sur ne se ce il sont avec son sa "
          "ses aux elle mais nous vous ou été cette",
    "ro": "și de în la cu a că pe un o din care este nu să se ce mai pentru fost sunt ca au sau lui iar acest "
          "această dar prin şi",
}
_COUNTS = Counter(w for words in _FUNCTION_WORDS.values() for w in set(words.split()))
FUNCTION_WORDS = {lang: frozenset(w for w in words.split() if _COUNTS[w] == 1) for lang, words in _FUNCTION_WORDS.items()}

# characters of a script: (language, the share of the text's letters it must reach)
SCRIPTS = [
    ("ko", re.compile(r"[\uac00-\ud7af\u1100-\u11ff]"), 0.3),
    ("ja", re.compile(r"[\u3040-\u30ff]"), 0.1),  # kana: Japanese writes Han characters too
    ("zh", re.compile(r"[\u4e00-\u9fff]"), 0.3),
]
KNOWN = tuple(FUNCTION_WORDS) + tuple(lang for lang, _, _ in SCRIPTS)
WORD = re.compile(r"[^\W\d_]+")
MIN_WORDS = 20  # fewer words say too little
MIN_SHARE = 0.1  # a language's function words in its own text: 25-40%
MIN_RATIO = 3.0  # ... and at least this many times the next language's share


def shares(lines: Sequence[str]) -> Dict[str, float]:
    """{language: the share of the words of ``lines`` (letters, for zh/ja/ko) that speak for it}."""
    text = "\n".join(lines).lower()
    words = WORD.findall(text)
    letters = sum(len(w) for w in words)
    out = {lang: sum(w in fw for w in words) / len(words) if words else 0.0 for lang, fw in FUNCTION_WORDS.items()}
    for lang, script, _ in SCRIPTS:
        out[lang] = len(script.findall(text)) / letters if letters else 0.0
    return out


def guess(lines: Sequence[str], sample: int = 2000) -> Optional[Tuple[str, Dict[str, float]]]:
    """(language, shares) of the first ``sample`` lines, or None when no language clearly leads."""
    lines = list(lines[:sample])
    if len(WORD.findall("\n".join(lines))) < MIN_WORDS:
        return None
    found = shares(lines)
    for lang, _, minimum in SCRIPTS:
        if found[lang] >= minimum:
            return lang, found
    words = sorted(FUNCTION_WORDS, key=found.get, reverse=True)
    best, second = found[words[0]], found[words[1]]
    if best >= MIN_SHARE and best >= MIN_RATIO * second:
        return words[0], found
    return None

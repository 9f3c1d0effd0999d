"""The Porter stemmer of ROUGE-1.5.5.pl (its ``sub stem``), ported rule for rule.

ROUGE-1.5.5 ships Martin Porter's Perl version ("Release 1", with his departures from the 1980 paper:
``bli`` -> ``ble`` and ``logi`` -> ``log`` in step 2) changed by Chin-Yew Lin on 02/14/2004 in step 4:
the suffixes are tried one after another on what the previous rule left, so ``agreement`` -> ``agreem``
(``ement`` and ``ment`` stay, then ``ent`` goes) and ``additionally`` -> ``addit`` (``al``, then ``ion``). No mode of
nltk's ``PorterStemmer`` does this: on newstest2014's 8,587 word types of more than 3 letters, its default
mode stems 168 differently, MARTIN_EXTENSIONS 50, ORIGINAL_ALGORITHM 59 (``tests/test_rouge155.py``).

The regular expressions are the Perl ones; Python's ``re`` reads them the same way.
"""
import re

STEP2 = {"ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize", "bli": "ble",
         "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous", "ization": "ize", "ation": "ate",
         "ator": "ate", "alism": "al", "iveness": "ive", "fulness": "ful", "ousness": "ous", "aliti": "al",
         "iviti": "ive", "biliti": "ble", "logi": "log"}
STEP3 = {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "", "ness": ""}

c = "[^aeiou]"  # consonant
v = "[aeiouy]"  # vowel
C = f"{c}[^aeiouy]*"  # consonant sequence
V = f"{v}[aeiou]*"  # vowel sequence
M_GT_0 = re.compile(f"^({C})?{V}{C}")  # [C]VC... is m > 0
M_EQ_1 = re.compile(f"^({C})?{V}{C}({V})?$")  # [C]VC[V] is m = 1
M_GT_1 = re.compile(f"^({C})?{V}{C}{V}{C}")  # [C]VCVC... is m > 1
HAS_VOWEL = re.compile(f"^({C})?{v}")
CVC = re.compile(f"^{C}{v}[^aeiouwxy]$")

STEP1A = re.compile("(ss|i)es$")
STEP1A_S = re.compile("([^s])s$")
STEP1B_DOUBLE = re.compile(r"([^aeiouylsz])\1$")
STEP2_RE = re.compile(f"({'|'.join(STEP2)})$")
STEP3_RE = re.compile(f"({'|'.join(STEP3)})$")
STEP4_RE = re.compile("(al|ance|ence|er|ic|able|ible|ant|ement|ou|ism|ate|iti|ous|ive|ize)$")
MENT, ENT, S_T_ION = re.compile("ment$"), re.compile("ent$"), re.compile("[st]ion$")
ED_ING, AT_BL_IZ = re.compile("(ed|ing)$"), re.compile("(at|bl|iz)$")


def strip_if(word, suffix_re, measure):
    """``word`` without the suffix ``suffix_re`` matches, when what is left satisfies ``measure``."""
    m = suffix_re.search(word)
    if m and measure.search(word[:m.start()]):
        return word[:m.start()]
    return word


def stem(w):
    if len(w) < 3:
        return w
    initial_y = w[0] == "y"
    if initial_y:  # an initial y is a consonant: Y never matches [aeiouy]
        w = "Y" + w[1:]

    # step 1a
    m = STEP1A.search(w)
    if m:
        w = w[:m.start()] + m.group(1)
    else:
        m = STEP1A_S.search(w)
        if m:
            w = w[:m.start()] + m.group(1)
    # step 1b
    if w.endswith("eed"):
        if M_GT_0.search(w[:-3]):
            w = w[:-1]
    else:
        m = ED_ING.search(w)
        if m and HAS_VOWEL.search(w[:m.start()]):
            w = w[:m.start()]
            if AT_BL_IZ.search(w):
                w += "e"
            elif STEP1B_DOUBLE.search(w):
                w = w[:-1]
            elif CVC.search(w):
                w += "e"
    # step 1c
    if w.endswith("y") and HAS_VOWEL.search(w[:-1]):
        w = w[:-1] + "i"
    # steps 2 and 3
    for suffix_re, table in ((STEP2_RE, STEP2), (STEP3_RE, STEP3)):
        m = suffix_re.search(w)
        if m and M_GT_0.search(w[:m.start()]):
            w = w[:m.start()] + table[m.group(1)]
    # step 4, as changed in ROUGE-1.5.5: each rule sees what the one before left
    w = strip_if(w, STEP4_RE, M_GT_1)
    w = strip_if(w, MENT, M_GT_1)
    if ENT.search(w):
        w = strip_if(w, ENT, M_GT_1)
    else:  # -sion, -tion lose ion
        m = S_T_ION.search(w)
        if m and M_GT_1.search(w[:m.start() + 1]):
            w = w[:m.start() + 1]
    # step 5
    if w.endswith("e"):
        base = w[:-1]
        if M_GT_1.search(base) or (M_EQ_1.search(base) and not CVC.search(base)):
            w = base
    if w.endswith("ll") and M_GT_1.search(w):
        w = w[:-1]

    if initial_y:
        w = w[0].lower() + w[1:]
    return w

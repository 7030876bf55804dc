# ruff: noqa: RUF001, E501  (Unicode punctuation sets are the point here)
"""Text helpers shared by the rule families: punctuation sets (from datatrove 0.10.1,
``datatrove/utils/text.py``, Apache-2.0) and a regex word splitter that approximates datatrove's
English word tokenizer (spaCy's blank ``en`` tokenizer) without a model.

The splitter keeps runs of non-space, non-punctuation characters joined by an inner ``.``,
``@`` or apostrophe (``e.g.``, ``3.5``, ``U.S.``, ``o'clock``) and URLs as one word, splits
contractions like spaCy (``does`` + ``n't``, ``it`` + ``'s``) and every other punctuation mark
off as its own token (``...`` stays one token, hyphens split words as spaCy's infixes do).
spaCy differs on some abbreviations, emoticons and CJK text; the parity benchmark
(``benchmarks/results_heuristics.md``) measures what that changes.
"""

from __future__ import annotations

import re
import threading

#: datatrove ``PUNCTUATION``: a word made only of these is a "symbol word".
PUNCTUATION = '!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„\';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_."}►»\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
PUNCTUATION_SET = frozenset(PUNCTUATION)
#: datatrove ``TERMINAL_PUNCTUATION`` (FineWeb's line-ending marks).
TERMINAL_PUNCTUATION = tuple('!.?։؝؞؟۔܀܁܂߹࠷࠹࠽࠾।॥၊။።፧፨᙮᜵᜶។៕៖៙៚᠃᠉᥄᥅᪨᪩᪪᪫᭚᭛᭞᭟᭽᭾᰻᰼᱾᱿‼‽⁇⁈⁉⸮⸼⹓⹔。꓿꘎꘏꛳꛷꡶꡷꣎꣏꤯꧈꧉꩝꩞꩟꫰꫱꯫﹒﹖﹗！．？｡𐩖𐩗𐽕𐽖𐽗𐽘𐽙𐾆𐾇𐾈𐾉𑁇𑁈𑂾𑂿𑃀𑃁𑅁𑅂𑅃𑇅𑇆𑇍𑇞𑇟𑈸𑈹𑈻𑈼𑊩𑑋𑑌𑗂𑗃𑗉𑗊𑗋𑗌𑗍𑗎𑗏𑗐𑗑𑗒𑗓𑗔𑗕𑗖𑗗𑙁𑙂𑜼𑜽𑜾𑥄𑥆𑩂𑩃𑪛𑪜𑱁𑱂𑻷𑻸\U00011f43\U00011f44𖩮𖩯𖫵𖬷𖬸𖭄𖺘𛲟𝪈')

_P = re.escape("".join(sorted(PUNCTUATION_SET - set(chr(c) for c in range(33)))))
_ABBREVIATIONS = ("Mr|Mrs|Ms|Dr|St|Jr|Sr|Inc|Ltd|Co|Corp|vs|Mt|Gen|Gov|Sen|Rep|Rev|Prof|Jan|Feb"
                  "|Aug|Sept|Oct|Nov|Dec")
_REST = rf"[^\s{_P}‘]"  # U+2018: not in the set; spaCy splits it off
_CONTRACTION = r"['’](?:s|re|ve|ll|d|m)\b|n['’]t\b"
_WORD = (rf"{_REST}+(?:[.@+&$]{_REST}+|[/:](?=\d){_REST}+|(?<=\d),(?=\d){_REST}+"
         rf"|['’](?!(?:s|re|ve|ll|d|m)\b){_REST}+)*")
TOKEN = re.compile(
    rf"https?://\S+|www\.\S+"                    # URLs stay whole (spaCy's URL match)
    rf"|(?:[^\W\d_]\.){{2,}}"                     # e.g. U.S.
    rf"|\b(?:[A-Z]|{_ABBREVIATIONS})\.(?=\s)"     # A. St. Mr. (spaCy's exceptions)
    rf"|(?i:{_CONTRACTION})"                      # 's 're n't ... split off (spaCy)
    rf"|{_REST}+(?=(?i:n['’]t)\b)"                # does|n't
    rf"|{_WORD}|\.\.\.|-{{2,}}|[{_P}‘]")

_LAST = threading.local()  # (texts list, its tokens): the families of one batch share them


def tokenize_all(texts: list[str]) -> list[list[str]]:
    """Tokens of every text; computed once per list of texts (the space-delimited families of
    one batch receive the same list), per thread."""
    if getattr(_LAST, "texts", None) is not texts:
        _LAST.texts, _LAST.tokens = texts, [TOKEN.findall(t) for t in texts]
    return _LAST.tokens

"""Types of answer values, for planting same-type counterfactuals and for checking that a planting kept its type.

A few functions, each a short list of documented rules (no model, no network):

- :func:`value_type` is what the counterfactual family plants by: the value's shape, refined by the question it
  answers. It gives ``(type, detail)``: ``date`` (detail: the date's format, see :func:`date_format`), ``number``
  (detail: its unit, see :func:`number_unit`), ``person``, ``place`` (detail: its kind, ``place:water:river``,
  ``place:land:island``, ``place:built:bridge``, ``place:city``, ``place:country``...), ``organisation``, ``group``
  (a people), ``name`` (a capitalised name whose kind neither its words nor its question tell: a title, a product,
  an event) or ``other`` (a common phrase); a name's or phrase's detail is what its question asks for.
- :func:`typed` says whether a type is specific enough to plant by: a phrase whose question asks for nothing in
  particular ("What increased...?") is not, and gets no value "of the same type".
- :func:`check_planting` is the checker that reports whether a planting kept the original's type: with the
  questions both values answer, the same :func:`value_type` (typed), or the same head noun, or answers to
  questions asking for the same noun ("Who founded the library?" wants a person: "a week in advance" is not one);
  without them, the two strings' shapes only (it then cannot tell a person's name from a product's: "Rollo" /
  "HoloLens" are both plain names). docs/benchmarks.md lists a sample of plantings judged by hand.

:func:`head_of` (a value's head noun) and :func:`question_head` (the noun a "what / which" question asks for) let the
planter keep what a name or phrase is about ("Swiss-Austrian border" -> another border).
"""

from __future__ import annotations

import re

_MONTHS = {m: i for i, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), start=1) for m in names}
_ERAS = frozenset("ad bc bce ce bp".split())
_NUMBER_WORDS = frozenset("""zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million billion trillion dozen half several few""".split())
_SCALES = frozenset("hundred hundreds thousand thousands million millions billion billions trillion trillions dozen "
                    "dozens".split())
_APPROX = frozenset("about around approximately roughly over under nearly almost some more less than up to c ca "
                    "circa only at least most by".split())
_UNIT_STOP = frozenset("a an the of and or per".split())
_TOKEN = re.compile(r"[A-Za-z\u00C0-\u024F]+(?:['\u2019][a-z]+)?|\d+(?:[,.]\d+)*(?:st|nd|rd|th|s)?|"
                    r"[$\u00a3\u20ac%\u00b0]")
_DIGITS = re.compile(r"^\d+(?:[,.]\d+)*(st|nd|rd|th|s)?$")

# place cue word -> the kind of place it names (a river is not a lake, a delta or a sea; a rock is not an island)
PLACE_KINDS: dict[str, str] = {
    **dict.fromkeys("""river rivers rive tributary tributaries branch branches stream streams canal canals
        waterway""".split(), "water:river"),
    **dict.fromkeys("lake lakes lagoon".split(), "water:lake"),
    **dict.fromkeys("sea seas ocean oceans gulf bay channel strait".split(), "water:sea"),
    **dict.fromkeys("delta estuary".split(), "water:delta"),
    **dict.fromkeys("falls waterfall".split(), "water:falls"),
    **dict.fromkeys("mountain mountains mountainous mount mt range hill hills alps".split(), "land:mountain"),
    **dict.fromkeys("valley gorge basin plain plains plateau graben".split(), "land:valley"),
    **dict.fromkeys("island islands isle".split(), "land:island"),
    **dict.fromkeys("peninsula cape coast".split(), "land:coast"),
    **{w: f"land:{w}" for w in ("desert", "forest", "glacier", "rock")},
    **dict.fromkeys("bridge bridges".split(), "built:bridge"),
    **dict.fromkeys("castle castles fortress".split(), "built:castle"),
    **dict.fromkeys("building buildings tower abbey cathedral wall".split(), "built:building"),
    **dict.fromkeys("port harbour harbor".split(), "built:port"),
    **dict.fromkeys("street avenue square park".split(), "built:street"),
    "dam": "built:dam",
    **dict.fromkeys("""county province state region district kingdom republic duchy empire shire land lands
        """.split(), "region"),
    **dict.fromkeys("city town village capital".split(), "city"),
}
PLACE_CUES = frozenset(PLACE_KINDS)
ORGANISATION_CUES = frozenset("""university college institute institution school academy company corporation corp
    inc ltd llc plc group association society council committee party church bank agency department ministry army
    navy force forces club league union foundation commission parliament court museum federation authority board
    office trust airlines airline motors network team fc orchestra order brotherhood guild senate congress assembly
    government administration organization organisation enterprises industries holdings records studios""".split())
PERSON_CUES = frozenset("""king queen pope saint st sir lord lady duke duchess count countess emperor empress prince
    princess bishop archbishop archduke general captain president chancellor dr mr mrs ms baron earl tsar czar sultan
    caliph cardinal abbot""".split())
# countries, continents, large regions and big cities: enough to tell "Croatia" or "France" from a person's name,
# and a country from a city or a region
CONTINENTS = frozenset("europe africa asia antarctica oceania america americas".split())
CITIES = frozenset(name.lower() for name in """London Paris Rome Berlin Vienna Madrid Moscow Beijing Tokyo
    Washington Chicago Boston Amsterdam Rotterdam Cologne Basel Strasbourg Mainz Bonn Duisburg Constantinople
    Jerusalem Antioch Naples Venice Milan Athens Prague Warsaw Budapest Lisbon Dublin Edinburgh Stockholm Oslo
    Copenhagen Brussels Geneva Zurich Munich Hamburg Frankfurt""".split())
REGIONS = frozenset(name.lower() for name in """Burgundy Normandy Gaul Sicily Byzantium Anatolia Scandinavia Iberia
    Bavaria Saxony Flanders Lombardy Tuscany Brittany Alsace Lorraine Bohemia Silesia Rhineland Westphalia""".split())
COUNTRIES = frozenset(name.lower() for name in """Afghanistan Albania Algeria Argentina Armenia Australia Austria
    Belgium Bolivia Brazil Britain Bulgaria Cambodia Cameroon Canada Chile China Colombia Croatia Cuba Cyprus Czechia
    Denmark Egypt England Estonia Ethiopia Finland France Georgia Germany Ghana Greece Hungary Iceland India Indonesia
    Iran Iraq Ireland Israel Italy Jamaica Japan Jordan Kenya Korea Latvia Lebanon Libya Lithuania Luxembourg Malaysia
    Mali Malta Mexico Morocco Nepal Netherlands Holland Nigeria Norway Pakistan Peru Philippines Poland Portugal
    Prussia Romania Russia Scotland Serbia Slovakia Slovenia Somalia Spain Sudan Sweden Switzerland Syria Taiwan
    Thailand Tunisia Turkey Uganda Ukraine Uruguay Venezuela Vietnam Wales Yemen Zimbabwe""".split())
GAZETTEER = CONTINENTS | CITIES | REGIONS | COUNTRIES
_GAZETTEER_KIND = {**dict.fromkeys(CONTINENTS, "continent"), **dict.fromkeys(CITIES, "city"),
                   **dict.fromkeys(REGIONS, "region"), **dict.fromkeys(COUNTRIES, "country")}
# "what", "which", and up to five words before the noun, none an auxiliary: in "What has shortened the Rhine
# river?" the river is not what is asked for
_WHAT = (r"\b(?:what|which)(?: (?!(?:has|have|had|does|did|do|can|could|will|would|may|might|should|must)\b)"
         r"[\w'-]+){0,5}? ")
_QUESTION_CUES: tuple[tuple[str, str], ...] = (
    (r"\b(what|which) (year|decade|century|date|day|month|period|era|time)\b|\bwhen\b", "date"),
    (r"\bhow (many|much|long|far|old|big|large|tall|high|deep|wide|fast)\b|\bwhat (percentage|percent|number|"
     r"amount|size|length)\b", "number:{}"),
    (r"\b(who|whom|whose)\b|" + _WHAT + r"(person|man|woman|king|queen|ruler|leader|emperor|pope|duke|bishop|"
     r"general|president|ceo|player|winner|author|artist|scientist|inventor|founder|son|daughter|brother|wife|"
     r"husband|nephew|abbot|count|saint)\b", "person"),
    (_WHAT + r"(rivers?|rive|lakes?|seas?|oceans?|canals?|tributary|tributaries|branch|branches|streams?|delta|"
     r"lagoon|bay|gulf|waterway)\b", "place:{}"),
    (_WHAT + r"(mountains?|mountainous|range|valley|gorge|islands?|plain|plateau|hills?|peninsula|desert|forest|"
     r"glacier|rock)\b", "place:{}"),
    (_WHAT + r"(bridges?|castles?|buildings?|port|dam|tower|abbey|cathedral|fortress|wall)\b", "place:{}"),
    (_WHAT + r"(city|cities|town|towns|village|capital)\b", "place:city"),
    (_WHAT + r"(country|countries|nation|nations)\b", "place:country"),
    (_WHAT + r"(continent)\b", "place:continent"),
    (_WHAT + r"(region|state|province|area|place|location|county|land)\b", "place:region"),
    (r"\bwhere\b", "place"),
    (_WHAT + r"(company|organi[sz]ation|university|college|school|group|party|team|church|institution|agency|band|"
     r"club|firm|army|order)\b", "organisation"),
    (r"\b(what|which) (direction|way)\b", "direction"),
    (_WHAT + r"(religion|language|culture|dialect|style|idiom)s?\b", "culture:{}"),
    (_WHAT + r"(book|poem|film|song|painting|tapestry|plan|operation|treaty|work|piece)s?\b", "work:{}"),
    (r"\b(name|names|called|call|translat\w*|known as)\b", "naming"),
)
_CUE_NOUNS = {"idiom": "style", "dialect": "language"}  # nouns that ask for the same thing as another


def tokens(text: str) -> list[str]:
    """Word, number and unit-symbol tokens of ``text`` (``$``, ``%``, ``°`` are tokens of their own)."""
    return _TOKEN.findall(text)


def _is_number(token: str) -> bool:
    return bool(_DIGITS.match(token)) or token.lower() in _NUMBER_WORDS


def date_format(text: str) -> str | None:
    """The format of a date or year, or None when ``text`` is not one: a ``+``-joined signature of its parts
    (``month``, ``day``, ``year``, ``decade``, ``century``, ``era``), so "Nov 17, 2019" is ``month+day+year``,
    "1066" is ``year``, "the 1960s" ``decade``, "10th century" ``century``, "AD 14" ``era+year``."""
    words = [t.lower().strip(".") for t in tokens(text)]
    words = [w for w in words if w not in ("the", "of", "in", "on", "early", "late", "mid")]
    if not words:
        return None
    parts: list[str] = []
    has_month = any(w in _MONTHS for w in words)
    has_era = any(w in _ERAS for w in words)
    for w in words:
        if w in _MONTHS:
            parts.append("month")
        elif has_month and re.fullmatch(r"\d{1,2}(st|nd|rd|th)?", w):
            parts.append("day")
        elif re.fullmatch(r"\d{3,4}", w) and 500 <= int(w) <= 2100 or has_era and re.fullmatch(r"\d{1,5}", w):
            parts.append("year")
        elif re.fullmatch(r"\d{3,4}s", w) or re.fullmatch(r"'?\d0s", w):
            parts.append("decade")
        elif w in ("century", "centuries") and "ordinal" in parts:
            parts = ["century" if x == "ordinal" else x for x in parts]
        elif re.fullmatch(r"\d{1,2}(st|nd|rd|th)", w):
            parts.append("ordinal")
        elif w in _ERAS:
            parts.append("era")
        elif w in ("and", "or", "to"):
            continue
        else:
            return None
    if not parts or "ordinal" in parts:
        return None
    return "+".join(dict.fromkeys(sorted(parts)))


def number_unit(text: str) -> str | None:
    """The unit of a number, or None when ``text`` is not a number: the words and symbols around its numerals that
    are not numbers, scales (hundred, million...), hedges (about, over...) or articles, lower-cased, a plural ``s``
    dropped ("30,000 people" -> ``people``; "$5 million" -> ``$``; "120 m" -> ``m``; "eight" -> ``""``). A value
    whose first word is a capitalised non-number ("Toy Story 4", "World War II") is a name, not a number."""
    toks = tokens(text)
    if not toks or not any(_is_number(t) for t in toks):
        return None
    first = next((t for t in toks if t.lower() not in _APPROX and t not in ("$", "\u00a3", "\u20ac")), toks[0])
    if first[:1].isupper() and not _is_number(first):
        return None
    unit = ["ordinal"] if any(re.fullmatch(r"\d+(st|nd|rd|th)", t) for t in toks) else []
    for t in toks:
        low = t.lower()
        if _is_number(t) or low in _SCALES or low in _APPROX or low in _UNIT_STOP:
            continue
        unit.append(low[:-1] if len(low) > 3 and low.endswith("s") and not low.endswith("ss") else low)
    return " ".join(unit)


_GROUP_ENDINGS = ("ans", "ians", "ons", "ites", "ese", "ish")
_CONNECTORS = ("of", "the", "de", "du", "d", "l", "la", "le", "and", "von", "van", "der", "den", "al", "bin", "da", "di",
               "for",
               "in")


_HEAD_ENDS = frozenset(("of", "van", "von", "de", "du", "der", "den", "d"))


def name_class(text: str) -> str | None:
    """``place:<kind>``, ``organisation``, ``group`` or ``name`` for a capitalised name (every content word
    capitalised), else None. The class is read from the name's head (the words before its first "of": "Sybilla of Normandy" is a
    name, "Kingdom of Sicily" a place, "University of Paris" an organisation). Person title first (King, Duke,
    Saint...): a plain ``name``. Organisation: an organisation cue word (University, Company, Party, Church...).
    Place: a place cue word, whose kind is ``water`` (River, Lake, Canal...), ``land`` (Mountains, Valley,
    Island...), ``built`` (Bridge, Castle, Port...), ``city`` (City, Town...) or ``region`` (Kingdom, Province...), or
    a word of the gazetteer (``continent``, ``country``, ``region``: Normandy, Bavaria..., ``city``); the last cue word
    decides. Group: a people ("the Welsh", "Normans", "Anglo-Saxons", "Irish"). Anything else
    capitalised is a plain ``name``: a person, a title, a product, an event."""
    raw = tokens(text)
    words = [w for w in raw if w.lower() not in _CONNECTORS]
    if len(words) > 1 and words[-1].islower() and words[-1] in PLACE_KINDS:  # "Tethys sea": a name and its kind
        words = words[:-1]
    if not words or not all(w[:1].isupper() or _DIGITS.match(w) for w in words) or all(_DIGITS.match(w)
                                                                                        for w in words):
        return None
    lowered = [w.lower() for w in raw]
    # the head ends at "of" or a name particle ("Hoek van Holland" is a hook, not Holland)
    cut = next((i for i, w in enumerate(lowered) if i and w in _HEAD_ENDS), len(lowered))
    head = [w for w in lowered[:cut] if w not in _CONNECTORS]
    if not head or head[0] in PERSON_CUES:
        return "name"
    if any(w in ORGANISATION_CUES for w in head):
        return "organisation"
    kinds = [PLACE_KINDS[w] if w in PLACE_KINDS else _GAZETTEER_KIND[w] for w in head
             if w in PLACE_KINDS or w in _GAZETTEER_KIND]
    if kinds:
        return f"place:{kinds[-1]}"  # the last cue word names the thing: "Rhine Valley" a valley
    last = head[-1]
    plural_people = lowered[0] == "the" and len(head) == 1 and (last.endswith(("s", "sh", "ch")) and
                                                                not last.endswith("ss"))
    if len(head) == 1 and (plural_people or last.endswith(_GROUP_ENDINGS)):
        return "group"
    return "name"


_ROLE = re.compile(r"^(?:(?:the|a|an|his|her|their|its)\s+)?(?:[a-z][\w'-]*\s+){1,2}(?P<name>[A-Z][\w'-]*"
                   r"(?:\s+(?:of|de|von|van|der|the)?\s*[A-Z][\w'-]*)+)$")


def shape(text: str) -> tuple[str, str]:
    """The string-only type of a value: ``("date", format)``, ``("number", unit)``, ``("place:<kind>" |
    "organisation" | "group" | "name", "")`` or ``("other", form)`` (:func:`phrase_form`). A plain name after one or
    two lower-case words of description is a name ("the shipowner Clara Vos"); "City, Country" is the city."""
    value = text.strip().strip(".,;:\"'")
    place, _comma, within = value.rpartition(", ")
    if place and within.lower() in _GAZETTEER_KIND:  # "Cologne, Germany": a city, named with its country
        return shape(place)
    fmt = date_format(value)
    if fmt is not None:
        return "date", fmt
    unit = number_unit(value)
    if unit is not None:
        return "number", unit
    cls = name_class(value)
    if cls is not None:
        return cls, ""
    described = _ROLE.match(value)
    if described and name_class(described.group("name")) == "name":  # a person described, not "construction
        return "name", ""                                            # of Delta Works"
    return "other", phrase_form(value)


_DIRECTIONS = frozenset("north south east west northward southward eastward westward northwards southwards eastwards "
                        "westwards upstream downstream northeast northwest southeast southwest".split())


def phrase_form(text: str) -> str:
    """The form of a common phrase: ``direction`` (west, eastwards...), ``participle`` (one or two words, the first
    ending in -ed: "dammed", "fell significantly" is a ``verb`` phrase), ``gerund`` (first word in -ing), ``word``
    (one word) or ``phrase`` (several)."""
    words = [w.lower() for w in tokens(text)]
    if not words:
        return "phrase"
    if any(w in _DIRECTIONS for w in words) and len(words) <= 3:
        return "direction"
    if len(words) <= 2 and (words[0].endswith("ed") or words[0] in ("fell", "rose", "grew", "shrank")):
        return "verb"
    if words[0].endswith("ing") and len(words[0]) > 5:
        return "gerund"
    return "word" if len(words) == 1 else "phrase"


def question_cue(question: str) -> str | None:
    """What a question asks for by its wording, the rule whose words come first ("Who led the troops when Cyprus
    was conquered?" asks for a person): ``date`` (when, what year / century /
    period), ``number`` (how many / much / long..., what percentage), ``person`` (who, whom, whose, what king /
    leader...), ``place:water`` (what river / lake / canal...), ``place:land`` (what mountains / valley /
    island...), ``place:built`` (what bridge / castle...), ``place:region`` (where, what city / country /
    region...), ``organisation`` (what company / university / party...), ``direction`` (which way / direction),
    ``culture`` (what religion / language / style), ``work`` (what book / plan / treaty...), ``naming`` (what is X
    called / its name / its translation), or None ("What increased in the Rhine?"). "What" may stand up to five
    words before its noun ("What is the largest suspension bridge...")."""
    low = " ".join(question.lower().split())
    # the rule whose words come first, and of two that start together the one whose noun comes first ("What
    # continent are the Canary Islands..." asks for a continent); "naming" only when nothing else is asked
    head = question_head(question)
    found = [(m.start() if kind != "naming" else len(low), m.end(), i, kind, m)
             for i, (pattern, kind) in enumerate(_QUESTION_CUES) for m in [re.search(pattern, low)] if m
             and _asks_for(m, head)]
    if not found:
        return None
    *_order, kind, match = min(found, key=lambda f: f[:3])
    if "{}" in kind:  # the noun or "how" word that says what kind of place, number, culture or work is asked for
        word = next((g for g in match.groups() if g), "")
        if kind.startswith("place:"):
            return f"place:{PLACE_KINDS[word]}"
        word = word[:-1] if word.endswith("s") and len(word) > 3 and not word.endswith("ss") else word
        kind = kind.format(_CUE_NOUNS.get(word, word))
    return kind


def _asks_for(match: re.Match[str], head: str | None) -> bool:
    """Whether a cue's noun is what its "what / which" question asks for: the question's head noun, when
    :func:`question_head` finds one ("What is the lower canal regulation..." asks for a regulation, not a canal)."""
    if head is None or not match.group(0).startswith(("what", "which")) or not match.groups():
        return True
    noun = next((g for g in reversed(match.groups()) if g), "")
    return head in (noun, noun[:-1], noun[:-2], noun[:-3] + "y")  # plurals: rivers, branches, tributaries


def value_type(text: str, question: str = "") -> tuple[str, str]:
    """The type the counterfactual family plants by: :func:`shape`, refined by the question for names and common
    phrases. A plain name becomes ``person``, ``place`` or ``organisation`` when its question asks for one ("Who
    ruled Cyprus?" -> person; "What river joins the Rhine?" -> place of kind water; "What city..." -> place of kind
    city); a place keeps its own kind when its words tell it ("Noord River", "Germany": a country); the detail of
    any other name or phrase is the question's cue ("What period was 2.5 million years ago?" -> a name answering a
    date question; "What religion..." -> ``culture:religion``), so a phrase answering "when" is replaced by another
    phrase answering "when". :func:`typed` says which types are specific enough to plant by."""
    kind, detail = shape(text)
    cue = question_cue(question) or ""
    if kind.startswith("place:"):
        return "place", kind
    if kind == "group" and cue.startswith("place:"):  # "Sargans" asked for as a dam: a place, not a people
        return "place", cue
    if kind == "name":
        if cue.split(":")[0] in ("person", "place", "organisation"):
            return cue.split(":")[0], cue
        return kind, cue
    if kind == "other":
        return kind, f"{detail}/{cue}"
    return kind, detail


def typed(kind: tuple[str, str]) -> bool:
    """Whether a :func:`value_type` says what its value is: a date, number, person, organisation, group or a place of
    a known kind is, and so is a common phrase answering a date, number or direction question; a place asked for
    only by "where" whose words do not tell its kind, a plain name whose question asks for nothing in particular
    ("What is X called?") and any other common phrase ("What increased...?") are not, and the family plants nothing
    "of the same type" for them."""
    name, detail = kind
    if name == "place":
        return detail != "place"
    if name == "name":
        return bool(detail) and detail != "naming"
    if name == "other":  # a common phrase is typed by a question for a date, a number or a direction only: two
        # phrases answering "who" or "which river" ("Turkish forces", "tidal currents") are rarely the same thing
        return detail.split("/", 1)[1].split(":")[0] in ("date", "number", "direction")
    return True


def check_planting(original: str, planted: str, question: str | None = None,
                   planted_question: str | None = None) -> tuple[bool, str]:
    """Whether ``planted`` has ``original``'s type, with the reason (``"number (km) -> number (km)"``). Without a
    question, by the string-only rules of :func:`shape` (person, title and product names all count as plain
    names). With ``question`` (the one ``original`` answers; ``planted_question``: the one ``planted`` answers, by
    default the same), both must also have one :func:`value_type` that :func:`typed` accepts ("Who founded the
    library?": a person for a person, not "a week in advance"), or be the same kind of phrase by their words: the
    same head noun (:func:`head_of`: "Middle Rhine" / "Lower Rhine") or answers to questions asking for the same
    noun (:func:`question_head`)."""
    a, b = shape(original), shape(planted)
    if question is None:
        show = [f"{k}{f' ({d})' if d else ''}" for k, d in (a, b)]
        return a == b, f"{show[0]} -> {show[1]}"
    asked = planted_question if planted_question is not None else question
    x, y = value_type(original, question), value_type(planted, asked)
    show = [f"{k}{f' ({d})' if d and d != k else ''}" for k, d in (x, y)]
    heads = head_of(original), head_of(planted)
    same_head = heads[0] is not None and heads[1] is not None and heads[0][0] == heads[1][0]
    asks = question_head(question)
    same_noun = asks is not None and asks == question_head(asked)
    ok = a == b and ((x == y and typed(x)) or same_head or same_noun)
    return ok, f"{show[0]} -> {show[1]}"


# words that end a noun group: prepositions, verbs of a question, conjunctions, relative words
_GROUP_END = frozenset("""of to in on for from at by with into onto over under between through during after before
    about against among within without does did do is was are were be been has had have can could will would may
    might should that which who whom whose when where why how and or but than as called named known meant mean
    located situated found used""".split())
_FUNCTION = _GROUP_END | frozenset("the a an its their his her this that these those it they there some any".split())
_KIND_OF = frozenset("type kind sort form class variety name".split())
_GENERIC = frozenset("name names term word words thing things one ones part parts way form forms".split())  # ask for nothing


def head_of(value: str) -> tuple[str, list[str], str] | None:
    """A value's head noun, the words before it and what follows it: the last word before the first function
    word ("Swiss-Austrian border" -> ``("border", ["Swiss-Austrian"], "")``; "greater density of cold water" ->
    ``("density", ["greater"], " of cold water")``), or None for a value of one word, or one that starts with a
    function word. Heads are compared lower-cased."""
    words = value.split()
    cut = next((i for i, w in enumerate(words) if w.lower().strip(".,;:") in _GROUP_END), len(words))
    group = words[:cut]
    if len(group) < 2 or group[0].lower() in _FUNCTION:
        return None
    tail = " ".join(words[cut:])
    head = group[-1].strip(".,;:").lower()
    if re.fullmatch(r"[ivxlcdm]+|\d+\w*", head):  # "William II", "World War 2": a numeral names no kind of thing
        return None
    return head, group[:-1], f" {tail}" if tail else ""


def question_head(question: str) -> str | None:
    """The noun a "what" / "which" question asks for ("Which border does the Rhine flow from?" -> ``border``;
    "What is the conventional method to measure the Rhine?" -> ``method``; "What type of delta..." and "What is the
    name of the branch..." -> ``delta``, ``branch``),
    lower-cased, or None when the question has no such noun or only a generic one (name, term, word...)."""
    words = re.findall(r"[\w'-]+", question.lower())
    start = next((i + 1 for i, w in enumerate(words) if w in ("what", "which")), None)
    if start is None:
        return None
    i = start
    if i < len(words) and words[i] in ("is", "was", "are", "were"):
        i += 1
    group: list[str] = []
    while i < len(words):
        w = words[i]
        if w in _FUNCTION and not (w == "of" and group and group[-1] in _KIND_OF):
            if group:
                break
            if w in ("the", "a", "an", "its", "their"):
                i += 1
                continue
            return None
        if group and i + 1 < len(words) and words[i + 1] in ("the", "a", "an", "its", "their", "his", "her"):
            break  # "What river joins the Rhine?": a word before an article is the verb
        if w == "of":  # "type of delta": the noun after the kind word
            group = []
        else:
            group.append(w)
        i += 1
    return group[-1] if group and group[-1] not in _GENERIC else None

"""Cheap line-level boilerplate removal for text that an HTML main-content extractor produced.

resiliparse's ``main_content=True`` drops the page chrome it recognises by tag and class name (global nav,
footers, ads, modals), but leaves what sits inside the content area: comment forms, share/print bars,
"related posts" lists, newsletter and cookie boxes, tag and category lines, bylines and dates. This module
removes those from the extracted text, one line at a time, with rules that cost microseconds per line:

1. **Characters**: soft hyphens and zero-width spaces removed, no-break and other fixed-width spaces made
   plain spaces, NFC composition (some pages ship decomposed umlauts).
2. **Phrase lines**: a short line that is, as a whole, a known boilerplate phrase in English, German,
   French, Spanish, Italian or Dutch ("Leave a reply", "Kommentare geschlossen", "Teilen", "Tags: ...",
   "Weiterlesen", "Alle Rechte vorbehalten", a bare date or "5 min read") is dropped; a few notices are
   dropped whatever their length ("This site uses Akismet ...", "Required fields are marked", cookie notices).
3. **Section tails**: a short heading that opens a block of other pages' teasers ("Related posts",
   "Das könnte Sie auch interessieren", "More from ...") is dropped with the run of short lines after it.
4. **Menu runs**: a run of several consecutive very short lines without sentence punctuation (menus,
   breadcrumbs, tag clouds) is dropped.

How the rules were made: by reading the output of the rules engine (``rules``) on one half of trafilatura's
real-world test pages (``training/evaluate.py``; the 44 pages whose URL's SHA-1 starts with an even byte),
and checking them on the other 39 pages, whose failures were not looked at while writing rules (only the
list of plain resiliparse's failures on all pages had been seen, once, at the start). The held-out half is
the honest estimate for unseen sites: phrase rules generalise less than they fit.
"""
from __future__ import annotations

import bisect
import re
import unicodedata

from curate.text.stream_safe import stream_safe

# --------------------------------------------------------------------------------------------- characters
_TO_SPACE = "\xa0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
_TO_DELETE = "\xad\u200b\u2060\ufeff"


def normalize_chars(text: str) -> str:
    """Soft hyphens and zero-width spaces out, fixed-width spaces to plain spaces, NFC (of the stream-safe
    text: a run of combining marks made NFC quadratic, see ``curate.text.stream_safe``)."""
    if text.isascii():
        return text
    for c in _TO_DELETE:
        if c in text:
            text = text.replace(c, "")
    for c in _TO_SPACE:
        if c in text:
            text = text.replace(c, " ")
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", stream_safe(text))
    return text


# ------------------------------------------------------------------------------------------------ phrases
# Each entry is a regex matched against the whole lower-cased line (bullets and surrounding punctuation
# stripped). Keep entries short and generic: a phrase belongs here only if it is boilerplate on any site.
_PHRASES = [
    # comments and comment forms
    r"(leave|post|write|add|submit) (a |your )?(reply|comment|response)s?",
    r"(\d+ |no |keine |one )?(comments?|kommentare?|commentaires?|comentarios?|commenti|reacties|responses|antworten)( \(\d+\))?",
    r"(kommentieren|comment|commenter|comentar|commenta)",
    r"(\d+ )?(besucher|user|users|visitors|gäste|guests|mitglieder|members) online.{0,40}",
    r"(\d+ )?(responses?|replies|antworten) to .{1,80}",
    r"comments? (are |is )?closed",
    r"kommentare? (sind )?geschlossen",
    r"(kommentar|kommentare)( hinzufügen| schreiben| verfassen| abgeben| anzeigen| lesen| einblenden)",
    r"(schreibe|hinterlasse|verfasse) (einen|deinen|ihren) kommentar",
    r"(cancel reply|antworten abbrechen|antwort abbrechen|reply|antworten|répondre|responder|rispondi)",
    r"(laisser|écrire|ajouter) un commentaire",
    r"(deja|dejar|escribe) (un|tu) comentario",
    r"be the first to (comment|like this)",
    r"sei (der|die) erste.{0,40}",
    r"(pingback|trackback)s?( von| from| url)?.{0,120}",
    r"kommentarfeed.{0,80}",
    r"(name|e-?mail|website|webseite|url|kommentar|comment|beitrag|message|nachricht)\s*\*?",
    r"\* ?(pflichtfelder|required|required fields)",
    r"(email|e-mail) (address|adresse)?",
    r"(notify|benachrichtige|benachrichtigen sie) (me|mich).{0,80}",
    r"(save|speichere) my name.{0,120}",
    r"(posted|submitted|written|geschrieben|verfasst) (by|von|on|am) .{1,60}",
    # sharing and page tools
    r"(share|teilen|partager|compartir|condividi|delen|tweet|twittern|pin it|pinnen|merken|drucken|print|"
    r"versenden|e-mail senden|per e-mail (senden|versenden|teilen)|artikel (drucken|versenden|teilen|merken))"
    r"( (this|on|via|on facebook|on twitter|diesen artikel|den artikel|article|post|page|story|seite|beitrag)+)?:?",
    r"(share|teile|teilen sie) (this|diesen|den|dieses) .{0,40}",
    r"diese geschichte teilen.{0,40}",
    r"(facebook|twitter|linkedin|xing|pinterest|instagram|whatsapp|reddit|tumblr|flipboard|pocket|"
    r"telegram|youtube|e-mail|email|mail|rss|feed|google\+?)( \d+)?",
    r"(\d+ )?(likes?|gefällt mir|shares?|views|aufrufe|mal gelesen|hits)",
    r"(gefällt mir|like this|like|liken|i like this)(:| wird geladen.*|\.\.\.)?",
    r"(loading|wird geladen|laden)\.*\s*…?",
    # related content, teasers, continuation links
    r"(related|similar|recommended|popular|trending|more|latest|recent|top|other) "
    r"(posts?|articles?|stories|topics?|reads|news|content|videos?|links?)(:)?",
    r"(you|we) (might|may|would) (also )?(like|enjoy|be interested in).{0,40}",
    r"(ähnliche|verwandte|weitere|neueste|aktuelle|beliebte|empfohlene|meistgelesene) "
    r"(beiträge|artikel|themen|nachrichten|meldungen|news|posts|videos|links)( zum thema.{0,40})?:?",
    r"(das|dies) könnte (sie|dich|euch) (auch )?interessieren.{0,20}",
    r"(auch|ebenfalls) interessant.{0,20}",
    r"(mehr|more) (zum thema|zu diesem thema|on this topic|from|von|aus|about|über|dazu|infos?)\b.{0,60}",
    r"(lesen sie|lies) (auch|mehr|hier).{0,60}",
    r"(read|lesen|lire|leggi|leer|lees) (more|mehr|weiter|la suite|the full story|tutto|más|verder)\b.{0,20}",
    r"(weiterlesen|mehr lesen|mehr erfahren|erfahre mehr|erfahren sie mehr|learn more|find out more|en savoir plus|"
    r"voir plus|saber más|scopri di più|lees meer|zum artikel|zur übersicht|zurück zur übersicht|alle anzeigen|"
    r"view all|see all|show more|load more|mehr anzeigen|weitere inhalte|lade weitere inhalte)\b.{0,20}",
    r"(à lire aussi|à découvrir|à voir aussi|lire aussi|voir aussi|sur le même sujet|dans la même rubrique)\b.{0,40}",
    r"(next|previous|prev|older|newer|nächster|vorheriger|nächste|vorherige|älterer|neuerer)"
    r" (post|article|entry|story|page|beitrag|artikel|seite|eintrag)s?\b.{0,80}",
    r"(back to|zurück zu[rm]?|retour à) .{1,40}",
    r"(back to top|nach oben|zum seitenanfang|top|zurück|back|home|startseite|accueil|inicio)",
    r"watch (this|next|now).{0,30}",
    r"read (this )?next.{0,30}",
    r"(most (read|popular|viewed|shared|commented)|meistgelesen|meistkommentiert|am meisten gelesen).{0,30}",
    r"diese beiträge solltest du.{0,40}",
    # newsletters, accounts, subscriptions
    r"(subscribe|abonnieren|abonnez-vous|suscríbete|iscriviti|sign up|sign in|log ?in|log ?out|register|"
    r"anmelden|abmelden|registrieren|einloggen|jetzt (anmelden|abonnieren|registrieren|testen|bestellen|kaufen))\b.{0,60}",
    r".{0,40}\b(newsletter)\b.{0,80}",
    r"(follow|folge|folgen sie) (us|uns|me|mir)\b.{0,60}",
    # cookie, privacy, legal, footer
    r"(copyright|\(c\)|©).{0,120}",
    r".{0,80}(all rights reserved|alle rechte vorbehalten|tous droits réservés|todos los derechos reservados)\.?.{0,40}",
    r"(impressum|imprint|datenschutz(erklärung)?|privacy( policy)?|terms( of (use|service))?|agb|kontakt|contact( us)?|"
    r"mentions légales|nutzungsbedingungen|cookie(s| policy| settings| einstellungen)?|sitemap|disclaimer|"
    r"about us|über uns|faq|hilfe|help|presse|press|jobs|karriere|careers|mediadaten|werben|advertise)",
    r"(proudly )?powered by .{1,60}",
    r"(theme|design|template) (by|von) .{1,60}",
    # ads and labels
    r"(anzeige|werbung|advertisement|advertising|sponsored( content)?|publicité|publicidad|pubblicità|ad|ads)( ?:.{0,60})?",
    # taxonomy lines
    r"(tags?|schlagworte?|schlagwörter|stichworte?|stichwörter|themen?|kategorien?|categories|category|"
    r"catégories?|étiquettes?|mots-clés|etiquetas|categorías|filed under|posted in|veröffentlicht in|abgelegt unter|"
    r"rubriken?|ressort|topics?|keywords?)\s*:.{0,200}",
    # reading time, dates and bylines on their own line
    r"\d+ ?(min(ute)?s?\.?|minuten) (read|lesezeit|lesen|de lecture)",
    r"(lesezeit|reading time|temps de lecture)\s*:?.{0,20}",
    r"((mo|di|mi|do|fr|sa|so|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|mon|tue|wed|thu|fri|sat|sun)[.,]? )?"
    r"(\d{1,2}\. ?)?(\d{1,2}\.\d{1,2}\.\d{2,4}|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}|"
    r"\d{1,2}\.? (jan|feb|mär|mar|apr|mai|may|jun|jul|aug|sep|okt|oct|nov|dez|dec)[a-zä]*\.? \d{4}|"
    r"(jan|feb|mär|mar|apr|mai|may|jun|jul|aug|sep|okt|oct|nov|dez|dec)[a-zä]*\.? \d{1,2},? \d{4})"
    r"(,? (um )?\d{1,2}[:.]\d{2}( ?uhr| ?[ap]m)?)?",
    r"(by|von|par|por|di|door) [\w.\-]+( [\w.\-]+){0,3}",
    r"(updated|aktualisiert|published|veröffentlicht|publié|stand)( am| on| le)?:? .{1,40}",
    r"(foto|photo|bild|image|quelle|source|credits?|photo credits?|bildquelle|fotos?)\s*:.{0,100}",
    # site tools
    r"(suche|search|rechercher|buscar|cerca|zoeken)( \.\.\.|…)?",
    r"(menu|menü|navigation|hauptmenü|main menu|skip to (main )?content|zum inhalt springen|direkt zum inhalt|"
    r"springe direkt zu:?|sie sind hier:?|you are here:?)",
]
_PHRASE_RE = re.compile(r"(?:" + "|".join(_PHRASES) + r")", re.IGNORECASE)

# Matching a line against all ~60 phrase patterns at once costs ~15 us; instead each line is tried only
# against the patterns that can match it. A pattern can fullmatch a line that starts with a letter only if
# the line's first word begins with a word written in the pattern (indexed by its first three letters, or
# whole if shorter, so "january" finds the pattern with "jan" and "comment" the one with "comments"); the
# few patterns that start with ".{0,n}" are tried only on documents that hold their key words; a line that
# starts with a digit or sign is tried against all patterns. tests/test_extract.py checks on real pages
# that this gives exactly the answers of the single alternation _PHRASE_RE.
_PHRASE_RES = [re.compile(p, re.IGNORECASE) for p in _PHRASES]
_FLOATING = [i for i, p in enumerate(_PHRASES) if p.startswith(".{")]
_FLOATING_WORDS = ("newsletter", "rights reserved", "rechte vorbehalten", "droits réservés", "derechos reservados")
_BY_PREFIX: dict[str, tuple[int, ...]] = {}
for _i, _p in enumerate(_PHRASES):
    if _i in _FLOATING:
        continue
    for _w in {w.lower() for w in re.findall(r"[^\W\d_]+", re.sub(r"\\[A-Za-z]", " ", _p))}:
        _k = _w[:3]
        if _i not in _BY_PREFIX.get(_k, ()):
            _BY_PREFIX[_k] = _BY_PREFIX.get(_k, ()) + (_i,)
_FIRST_WORD = re.compile(r"[^\W\d_]+")


def _phrase_match(s: str, floating: bool) -> bool:
    """``_PHRASE_RE.fullmatch(s)``, faster. ``floating``: the document holds a _FLOATING_WORDS word."""
    if not s[0].isalpha():
        return _PHRASE_RE.fullmatch(s) is not None
    w = _FIRST_WORD.match(s).group(0).lower()
    cands = _BY_PREFIX.get(w[:3], ())
    if len(w) >= 2:
        cands = cands + _BY_PREFIX.get(w[:2], ()) + _BY_PREFIX.get(w[:1], ())
    elif w:
        cands = cands + _BY_PREFIX.get(w[:1], ())
    for i in cands:
        if _PHRASE_RES[i].fullmatch(s):
            return True
    if floating:
        for i in _FLOATING:
            if _PHRASE_RES[i].fullmatch(s):
                return True
    return False


# Notices that are boilerplate wherever they occur in a line (up to 600 characters): (keys, regex) pairs; the
# regex (on the lower-cased line) runs only on lines that hold one of its keys (plain substrings, found
# with str.find over the whole document).
_NOTICES = [(keys, re.compile(r)) for keys, r in [
    (("akismet",), r"akismet"),
    (("fields",), r"required fields are marked"),
    (("felder",), r"(erforderliche|pflicht)felder sind|pflichtfelder"),
    (("published", "publiée"),
     r"(your )?e-?mail address will not be published|votre adresse (e-mail|de messagerie) ne sera pas publiée"),
    (("veröffentlicht",), r"e-mail-adresse wird nicht veröffentlicht"),
    (("cookie",), r"(we|this (site|website)|wir|diese (web)?seite|website|webseite) (uses?|verwende[nt]|nutz(en|t)|setzen|"
                  r"speicher[nt]) cookies|utilise des cookies|utilizamos cookies|(what|was) (are|sind) cookies|"
                  r"cookies? (settings|einstellungen|policy|richtlinie)"),
    (("by continuing", "by using"), r"by (continuing|using) (to (use|browse) )?(this|our) (web)?site"),
    (("zeilenumbr",), r"zeilenumbrüche und absätze werden automatisch"),
    (("nutzung", "absend"), r"mit (der|dem) (nutzung|absenden|absendung).{0,60}(erklären|willige|stimme|akzeptier)"),
    (("willige", "stimme", "akzeptiere"), r"ich (willige|stimme|akzeptiere).{0,80}(datenschutz|newsletter|e-mail)"),
    (("consent", "agree"), r"\bi (consent|agree).{0,80}(privacy|newsletter|e-mail|email)"),
]]
# A line of up to 160 characters that points to the privacy policy is a form or cookie notice.
_PRIVACY_WORDS = ("datenschutzerklärung", "datenschutzbestimmungen", "datenschutzhinweise", "privacy policy",
                  "privacy statement", "politique de confidentialité", "política de privacidad")
_NOTICE_KEYS = tuple(k for keys, _ in _NOTICES for k in keys) + _PRIVACY_WORDS
_NOTICE_BY_KEY = {k: rx for keys, rx in _NOTICES for k in keys}


def _notice_lines(low: str, starts: list[int]) -> dict[int, list[str]]:
    """Line index -> notice keys in that line, from the lower-cased document and its line start offsets."""
    found: dict[int, list[str]] = {}
    for k in _NOTICE_KEYS:
        pos = low.find(k)
        while pos != -1:
            i = bisect.bisect_right(starts, pos) - 1
            found.setdefault(i, []).append(k)
            pos = low.find(k, pos + len(k))
    return found


def _is_notice(s: str, keys) -> bool:
    if len(s) > 600:
        return False
    low = s.lower()
    for k in keys:
        rx = _NOTICE_BY_KEY.get(k)
        if rx is None:  # a privacy-policy word
            if len(s) <= 160:
                return True
        elif rx.search(low):
            return True
    return False


# Headings that open a block of teasers for other pages: drop them and the short lines that follow.
_SECTION_RE = re.compile(
    r"(related|similar|recommended|popular|more|latest|recent|other|trending) "
    r"(posts?|articles?|stories|topics?|reads|news|videos?)|"
    r"(you|we) (might|may) (also )?like|"
    r"(ähnliche|verwandte|weitere|empfohlene|beliebte|meistgelesene|neueste) (beiträge|artikel|themen|nachrichten|meldungen|news|posts|videos)|"
    r"(das|dies) könnte (sie|dich|euch) (auch )?interessieren|(auch|ebenfalls) interessant|mehr zum thema|"
    r"(mehr|more) (aus|von|from) |lesen sie (auch|mehr)|(à lire aussi|à découvrir|voir aussi|sur le même sujet)|"
    r"diese beiträge solltest du|(watch|read) (this )?next|(top|most) (stories|read|popular)",
    re.IGNORECASE,
)

_SECTION_PREFIX = {w[:3] for w in re.findall(r"[^\W\d_]+", _SECTION_RE.pattern.lower())}


def _may_be_section(s: str) -> bool:
    """``_SECTION_RE.match(s)``, tried only when the first word starts like a word of its pattern."""
    return s.split(None, 1)[0][:3].lower() in _SECTION_PREFIX and _SECTION_RE.match(s) is not None


_BULLET_RE = re.compile(r"^(?:[•·◦▪▸►*\-–—|>]+|\d{1,3}[.)])\s+")
_BULLET_START = frozenset("•·◦▪▸►*-–—|>0123456789")
_EDGE_PUNCT = " \t|:;,.!?·•-–—>»«\"'()[]"
_SENTENCE_END = (".", "!", "?")
_CODE_CHARS = re.compile(r"[(){}\[\]=;<>_\\/#$@`]")


def _core(line: str) -> str:
    """A line without list bullets and edge punctuation, for phrase matching."""
    s = line.strip()
    if s and s[0] in _BULLET_START:
        s = _BULLET_RE.sub("", s)
    return s.strip(_EDGE_PUNCT)


def is_phrase_line(line: str, max_len: int = 100) -> bool:
    """Whether a line is boilerplate by its wording alone (rule 2 above)."""
    s = _core(line)
    if not s:
        return True
    if len(s) <= max_len and _phrase_match(s, True):
        return True
    low = s.lower()
    return _is_notice(s, [k for k in _NOTICE_KEYS if k in low])


def _is_menu_item(s: str) -> bool:
    """Very short line without sentence punctuation (a menu entry, breadcrumb or tag); not code."""
    return (len(s) <= 30 and not s.endswith(_SENTENCE_END) and s.count(" ") <= 3
            and _CODE_CHARS.search(s) is None)


def clean(text: str, menu_run: int = 5, section_tail: int = 12) -> str:
    """Normalise characters and drop boilerplate lines; kept lines keep the paragraph breaks before them."""
    text = normalize_chars(text)
    lines = text.split("\n")
    n = len(lines)
    low = text.lower()
    floating = any(k in low for k in _FLOATING_WORDS)
    if len(low) == len(text):
        starts, pos = [], 0
        for line in lines:
            starts.append(pos)
            pos += len(line) + 1
        notices = _notice_lines(low, starts)
    else:  # lower-casing changed the length (a rare character): find keys line by line
        notices = {}
        for i, line in enumerate(lines):
            ll = line.lower()
            ks = [k for k in _NOTICE_KEYS if k in ll]
            if ks:
                notices[i] = ks
    cores = [_core(l) for l in lines]
    keep = [bool(c) for c in cores]

    # 2. phrase and notice lines; 3. section tails (the heading, then the short teaser lines after it)
    skip_until = -1
    for i in range(n):
        s = cores[i]
        if not s or i <= skip_until:
            continue
        section = len(s) <= 60 and _may_be_section(s)
        if section or (len(s) <= 100 and _phrase_match(s, floating)) or (i in notices and _is_notice(s, notices[i])):
            keep[i] = False
            if section:
                taken = 0
                j = i + 1
                while j < n and taken < section_tail:
                    t = cores[j]
                    if t:
                        if len(t) > 120 or (t.count(" ") >= 11 and t.endswith(_SENTENCE_END)):
                            break
                        keep[j] = False
                        taken += 1
                    j += 1
                skip_until = j - 1

    # 4. menu runs among the lines still kept
    run: list[int] = []
    for i in range(n + 1):
        if i < n:
            if not keep[i]:
                continue
            if _is_menu_item(cores[i]):
                run.append(i)
                continue
        if len(run) >= menu_run:
            for k in run:
                keep[k] = False
        run = []

    # reassemble: a kept line keeps the blank-line separation that preceded it
    out: list[str] = []
    blank = False
    for i in range(n):
        if not cores[i] and not lines[i].strip():
            blank = True
            continue
        if keep[i]:
            if out:
                out.append("\n\n" if blank else "\n")
            out.append(lines[i].rstrip())
            blank = False
    return "".join(out).strip()

#!/usr/bin/env bash
# Builds the English training corpus for the radixserve demo model (models/radixserve-demo).
#
# Runs on a Debian 12 (bookworm) machine with apt configured ("apt-get update" done once).
# Downloads a fixed list of Debian *main* packages with `apt-get download` (nothing is
# installed), unpacks them with `dpkg-deb -x` into a temporary folder, turns their English
# prose (fortune cookies, the Jargon File, manual pages, POD, reStructuredText, AsciiDoc
# and HTML manuals) into plain UTF-8 text, deduplicates it and writes:
#
#   OUTDIR/corpus.txt.gz       documents separated by a line "<|endoftext|>"
#   OUTDIR/corpus_sources.txt  package, version, license and amount of text taken from each
#   OUTDIR/corpus_stats.json   the same numbers, machine readable
#
# A small part of the corpus (about 4%) is synthetic ChatML built from the same packages
# (fortune cookies, Jargon File entries, man page NAME lines), so that the demo model learns
# the chat template's shape and to end an answer with <|im_end|>.
#
# Usage: tools/prepare_demo_corpus.sh [OUTDIR]      (default: <repo>/.demo_corpus)
# Needs: apt-get, dpkg-deb, python3 (stdlib only), groff (package groff-base) for man pages.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
outdir=${1:-$repo/.demo_corpus}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

# package|license, as stated in the package's /usr/share/doc/<package>/copyright
# (all are in Debian's main section, i.e. DFSG-free).
PACKAGES=(
  "fortunes-min|BSD-3-clause (Regents of the University of California; fortune-mod's copyright file), cookies are quotations collected by the fortune-mod project"
  "fortunes|BSD-3-clause (Regents of the University of California; fortune-mod's copyright file), cookies are quotations collected by the fortune-mod project"
  "jargon-text|public domain (the Jargon File 4.4.7, Eric S. Raymond)"
  "manpages|Linux-man-pages-copyleft, GPL-2+, BSD-2/3/4-clause, Expat and other free licenses (per page, see copyright file)"
  "manpages-dev|Linux-man-pages-copyleft, GPL-2+, BSD-2/3/4-clause, Expat and other free licenses (per page, see manpages' copyright file)"
  "perl-doc|GPL-1+ or Artistic (Perl's own documentation)"
  "python3.11-doc|PSF-2.0 (Python Software Foundation License Version 2; the documentation)"
  "postgresql-doc-15|PostgreSQL License (BSD-like)"
  "sqlite3-doc|public domain (SQLite documentation)"
  "git-doc|GPL-2 (Git's documentation)"
  "linux-doc-6.1|GPL-2 (the Linux kernel's Documentation/ tree)"
  "debian-handbook|GPL-2+ or CC-BY-SA-3.0 (The Debian Administrator's Handbook; English part only)"
  "debian-reference-en|GPL-2+ (Debian Reference)"
  "developers-reference|GPL-2 (Debian Developer's Reference)"
  "maint-guide|GPL-2+ (Debian New Maintainers' Guide)"
  "debian-policy|GPL-2+ (Debian Policy Manual)"
  "debian-faq|permissive verbatim/modified-copies notice, (C) Software in the Public Interest (Debian FAQ)"
  "doc-debian|GPL / Open Publication License v1.0 (Debian Project documents, e.g. Social Contract, DFSG, BTS docs)"
  "debian-history|GPL-2+ (A Brief History of Debian; English part only)"
  "rust-doc|MIT or Apache-2.0 (The Rust Programming Language book, Reference, Rust by Example, Nomicon and other guides; API docs not used)"
  "python-django-doc|BSD-3-Clause (Django's documentation)"
  "apache2-doc|Apache-2.0 (Apache HTTP Server documentation; English part only)"
  "postfix-doc|EPL-2.0 or IPL-1.0 (Postfix documentation)"
)

command -v groff >/dev/null || { echo "groff is needed (apt-get install groff-base)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/demo_corpus.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/x"
names=(); for e in "${PACKAGES[@]}"; do names+=("${e%%|*}"); done
echo "prepare_demo_corpus: downloading ${#names[@]} packages into $work/debs" >&2
(cd "$work/debs" && apt-get download -q "${names[@]}" >/dev/null 2>"$work/apt.log") || {
  cat "$work/apt.log" >&2; echo "apt-get download failed (run apt-get update first?)" >&2; exit 1; }

: >"$work/packages.tsv"
for e in "${PACKAGES[@]}"; do
  p=${e%%|*}; lic=${e#*|}
  deb=$(ls "$work/debs/${p}_"*.deb | head -n1)
  ver=$(dpkg-deb -f "$deb" Version); sec=$(dpkg-deb -f "$deb" Section)
  mkdir -p "$work/x/$p"; dpkg-deb -x "$deb" "$work/x/$p"
  printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$ver" "$sec" "$(basename "$deb")" "$lic" >>"$work/packages.tsv"
done

echo "prepare_demo_corpus: converting to text" >&2
python3 - "$work" "$outdir" <<'PYEOF'
import gzip, hashlib, html, json, os, random, re, subprocess, sys, unicodedata
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser

work, outdir = sys.argv[1], sys.argv[2]
X = os.path.join(work, "x")
EOT = "<|endoftext|>"

def read(path):
    data = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    return data.decode("utf-8", errors="replace")

def files(pkg, sub, pattern, exclude=None):
    base = os.path.join(X, pkg, sub)
    out = []
    for root, dirs, fs in os.walk(base):
        dirs.sort()
        for f in sorted(fs):
            p = os.path.join(root, f)
            rel = os.path.relpath(p, base)
            if os.path.islink(p) or not re.search(pattern, rel):
                continue
            if exclude and re.search(exclude, rel):
                continue
            out.append(p)
    return out

# ---------------------------------------------------------------- cleaning helpers
SYM = set("{}[]();=<>$#|\\/*&^~@%_+`")

def is_code_like(par):
    s = "".join(par.split())
    if not s:
        return True
    letters = sum(c.isalpha() for c in s)
    sym = sum(c in SYM for c in s)
    if letters / len(s) < 0.62 or sym / len(s) > 0.07:
        return True
    first = par.lstrip()[:4]
    if first.startswith(("$ ", "# ", ">>>", "...", "%", "//", "/*")):
        return True
    return False

def reflow(text, keep_code=False, min_letters=0):
    """Split into paragraphs, join prose lines, drop code-like paragraphs."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r", "").replace("\t", "    ").replace("\u00a0", " ").replace("\u00ad", "")
    text = re.sub(r"[\u2010\u2011]", "-", text)
    pars = []
    for raw in re.split(r"\n\s*\n", text):
        lines = [l.strip() for l in raw.split("\n") if l.strip()]
        if not lines:
            continue
        par = "\n".join(lines)
        if not keep_code and is_code_like(par):
            continue
        # list-like paragraphs (every line short or bulleted) keep their line breaks
        bullets = sum(bool(re.match(r"^([-*\u2022o]|\d+[.)])\s", l)) for l in lines)
        if len(lines) > 1 and bullets >= len(lines) - 1 and bullets > 0:
            par = "\n".join(re.sub(r"\s+", " ", l) for l in lines)
        else:
            par = re.sub(r"\s+", " ", " ".join(lines)).strip()
        pars.append(par)
    out = "\n\n".join(pars)
    if sum(c.isalpha() for c in out) < min_letters:
        return ""
    return out

# ---------------------------------------------------------------- formats
def rst_to_text(t):
    t = t.replace("\r", "")
    lines = t.split("\n")
    out, i, n = [], 0, len(lines)
    drop_directives = re.compile(r"^\s*\.\. +(code-block|code|sourcecode|literalinclude|toctree|highlight|kernel-doc|only|tabularcolumns|raw|math|productionlist|csv-table|list-table|table|doctest|testcode|testoutput|testsetup|testcleanup|image|figure|include|index|sectionauthor|moduleauthor|c:\w+|cpp:\w+|contents|flat-table|kernel-abi|kernel-feat|graphviz|literal|parsed-literal|audit-event|availability|opcode|\w+::\w+)::")
    def indent(s):
        return len(s) - len(s.lstrip(" ")) if s.strip() else None
    while i < n:
        l = lines[i]
        s = l.strip()
        if re.match(r"^([=\-~^\"'`#*+.:_])\1{2,}$", s):
            i += 1; continue
        m = re.match(r"^(\s*)\.\.(\s|$)", l)
        if m:
            base = len(m.group(1))
            dropping = bool(drop_directives.match(l)) or "::" not in l
            # directive or comment: skip the marker line (and its options); keep body of admonitions
            i += 1
            while i < n and lines[i].strip() and re.match(r"^\s+:[\w-]+:", lines[i]):
                i += 1
            if dropping:
                while i < n and (not lines[i].strip() or (indent(lines[i]) or 0) > base):
                    if not lines[i].strip() and i + 1 < n and lines[i + 1].strip() and indent(lines[i + 1]) <= base:
                        break
                    i += 1
            continue
        if s.endswith("::"):
            base = indent(l)
            # literal block follows: keep the lead-in sentence, drop the block
            lead = re.sub(r"\s*::$", ":" if s != "::" else "", l)
            if lead.strip():
                out.append(lead)
            i += 1
            while i < n and not lines[i].strip():
                i += 1
            while i < n and (not lines[i].strip() or indent(lines[i]) > base):
                i += 1
            out.append("")
            continue
        out.append(l)
        i += 1
    t = "\n".join(out)
    t = re.sub(r":[\w:.-]+:`~?([^`<]*?)\s*<[^`>]*>`", r"\1", t)       # :role:`text <target>`
    t = re.sub(r":[\w:.-]+:`~?(?:[\w.]+\.)?([^`]*)`", r"\1", t)       # :role:`~a.b.c` -> c
    t = re.sub(r"`([^`<]+?)\s*<[^`>]+>`__?", r"\1", t)                # `text <url>`_
    t = re.sub(r"``([^`]+)``", r"\1", t)
    t = re.sub(r"`([^`]+)`_{0,2}", r"\1", t)
    t = re.sub(r"\*\*([^*\n]+)\*\*", r"\1", t)
    t = re.sub(r"(?<![\w*])\*([^*\s][^*\n]*?)\*(?![\w*])", r"\1", t)
    t = re.sub(r"\|(\w[\w -]*)\|", r"\1", t)
    t = re.sub(r"(?<!\w)([A-Za-z][\w-]*[A-Za-z0-9])_(?=[\s.,;:)]|$)", r"\1", t)
    t = re.sub(r"\\([_*`|\\])", r"\1", t)
    return t

def asciidoc_to_text(t):
    out, in_block = [], None
    for l in t.replace("\r", "").split("\n"):
        s = l.strip()
        if re.match(r"^(-{4,}|\.{4,}|={4,}|\+{4,}|/{4,}|_{4,})$", s) and len(set(s)) == 1:
            if in_block == s:
                in_block = None
            elif in_block is None:
                in_block = s
            out.append("")
            continue
        if in_block:
            if in_block.startswith(("=", "_")):   # example/quote blocks hold prose
                out.append(l)
            continue
        if re.match(r"^(-+|=+|~+|\^+)$", s):
            continue
        if re.match(r"^(\[.*\]|ifn?def::.*|endif::.*|include::.*|:\w[\w-]*:.*)$", s):
            continue
        if l.startswith((" ", "\t")) and out and not out[-1].strip():
            continue  # indented literal paragraph
        out.append(re.sub(r"^=+\s+", "", l))
    t = "\n".join(out)
    t = re.sub(r"linkgit:([\w.-]+)\[(\d)\]", r"\1(\2)", t)
    t = re.sub(r"\b(?:https?|link):\S+?\[([^\]]*)\]", r"\1", t)
    t = re.sub(r"<<[^,>]+,\s*([^>]+)>>", r"\1", t)
    t = re.sub(r"<<([^>]+)>>", r"\1", t)
    t = re.sub(r"`([^`]+)`", r"\1", t)
    t = re.sub(r"(?<!\w)'([^'\n]+)'(?!\w)", r"\1", t)
    t = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"\1", t)
    t = re.sub(r"(?<!\w)_([^_\n]+)_(?!\w)", r"\1", t)
    t = re.sub(r"\{(litdd|tilde|caret|startsb|endsb|apostrophe)\}",
               lambda m: {"litdd": "--", "tilde": "~", "caret": "^", "startsb": "[", "endsb": "]", "apostrophe": "'"}[m.group(1)], t)
    t = re.sub(r"\s\+$", "", t, flags=re.M)
    t = re.sub(r"::\s*$", ":", t, flags=re.M)
    return t

def pod_to_text(t):
    out = []
    for par in re.split(r"\n\s*\n", t.replace("\r", "")):
        if not par.strip():
            continue
        if par[0] in " \t":
            continue  # verbatim (code)
        if par.startswith("="):
            m = re.match(r"=(head\d|item)\s*(.*)", par, re.S)
            if m:
                par = m.group(2).strip()
                par = re.sub(r"^\*\s*", "", par)
                if not par:
                    continue
            else:
                continue  # =over, =back, =cut, =pod, =for, =begin, =end, =encoding
        out.append(par)
    t = "\n\n".join(out)
    esc = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&", "apos": "'"}
    t = re.sub(r"E<(\w+)>", lambda m: esc.get(m.group(1), chr(int(m.group(1))) if m.group(1).isdigit() else ""), t)
    for _ in range(4):
        t = re.sub(r"([BICFSXZL])<<+\s+(.*?)\s+>>+", lambda m: "\x00%s\x01%s\x02" % (m.group(1), m.group(2)), t, flags=re.S)
        t = re.sub(r"([BICFSXZL])<([^<>]*)>", lambda m: "\x00%s\x01%s\x02" % (m.group(1), m.group(2)), t)
    def fix(m):
        code, body = m.group(1), m.group(2)
        if code in "XZ":
            return ""
        if code == "L":
            body = body.split("|")[0] if "|" in body else body
            body = re.sub(r'^"?(.*?)"?$', r"\1", body)
            body = re.sub(r'^([\w:]+)/"?([^"]+)"?$', r'"\2" in \1', body)
            body = body.lstrip("/").strip('"')
        return body
    for _ in range(6):
        t = re.sub(r"\x00([A-Z])\x01([^\x00\x01\x02]*)\x02", fix, t)
    return t.replace("\x00", "").replace("\x01", "").replace("\x02", "")

class HTMLText(HTMLParser):
    BLOCK = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "tr", "br", "table",
             "section", "blockquote", "ul", "ol", "dl", "hr", "article", "header", "footer", "caption", "td", "th"}
    SKIP_TAGS = {"script", "style", "head", "nav", "pre", "noscript", "svg", "form", "button", "select", "textarea"}
    SKIP_CLASS = re.compile(r"\b(navheader|navfooter|toc|sphinxsidebar\w*|related|footer|breadcrumb\w*|headerlink|"
                            r"menu|nosearch|sidebar|tocdiv|programlisting|screen|synopsis|cmdsynopsis|funcsynopsis|"
                            r"highlight\w*|literal-block|doctest|indexterm|index|legalnotice|copyright|revhistory)\b")
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip_tag, self.skip_depth = [], None, 0
    def handle_starttag(self, tag, attrs):
        if self.skip_tag:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        cls = " ".join(v or "" for k, v in attrs if k in ("class", "id", "role"))
        if tag in self.SKIP_TAGS or (cls and self.SKIP_CLASS.search(cls) and tag not in ("br", "hr", "img", "html", "body", "main")):
            self.skip_tag, self.skip_depth = tag, 1
            return
        if tag in self.BLOCK:
            self.parts.append("\n\n")
        elif tag in ("td", "th"):
            self.parts.append(" ")
    def handle_startendtag(self, tag, attrs):
        if not self.skip_tag and tag in ("br", "hr"):
            self.parts.append("\n\n")
    def handle_endtag(self, tag):
        if self.skip_tag:
            if tag == self.skip_tag:
                self.skip_depth -= 1
                if self.skip_depth == 0:
                    self.skip_tag = None
            return
        if tag in self.BLOCK:
            self.parts.append("\n\n")
    def handle_data(self, data):
        if not self.skip_tag:
            self.parts.append(re.sub(r"\s+", " ", data))

def html_to_text(t):
    p = HTMLText()
    try:
        p.feed(t); p.close()
    except Exception:
        pass
    text = "".join(p.parts)
    return re.sub(r"[ ]*\n[ \n]*\n[ ]*", "\n\n", text)

def man_to_text(path):
    src = read(path)
    if re.match(r"^\.so\s", src.strip()) and src.strip().count("\n") < 2:
        return "", None
    try:
        r = subprocess.run(["groff", "-t", "-mandoc", "-Tutf8", "-P-cbou", "-rLL=3000n", "-rHY=0", "-rcR=1"],
                           input=src.encode(), capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "", None
    txt = r.stdout.decode("utf-8", errors="replace")
    lines = txt.split("\n")
    out, section, name_line = [], None, None
    skip_sections = {"SEE ALSO", "COLOPHON", "AUTHOR", "AUTHORS", "COPYRIGHT", "REPORTING BUGS", "VERSIONS", "STANDARDS", "CONFORMING TO"}
    for l in lines:
        if re.search(r"\S {12,}\S", l) and l.strip() and not l.startswith(" "):
            continue  # page header/footer
        if l and not l[0].isspace() and l.strip().isupper():
            section = l.strip()
            if section in skip_sections:
                continue
            out.append("")
            out.append(section.title())
            out.append("")
            continue
        if section in skip_sections:
            continue
        if section == "NAME" and l.strip() and name_line is None:
            name_line = l.strip()
        ind = len(l) - len(l.lstrip(" "))
        if ind >= 11 and section in ("SYNOPSIS", "EXAMPLES", "EXAMPLE"):
            continue
        out.append(l.strip() if ind < 11 else "    " + l.strip())
        if ind >= 11:
            out.append("")
    return "\n".join(out), name_line

# ---------------------------------------------------------------- collect documents
docs = []        # (source package, text)
chat_src = {"fortune": [], "jargon": [], "man": []}

def add(pkg, text, min_letters=300):
    text = reflow(text, min_letters=min_letters)
    if text:
        docs.append((pkg, text))

# fortunes
for pkg in ("fortunes-min", "fortunes"):
    for p in files(pkg, "usr/share/games/fortunes", r"^[\w-]+$", exclude=r"^(ascii-art|translate-me)$"):
        for ck in re.split(r"\n%\n", read(p)):
            ck = ck.strip("\n")
            if not ck.strip() or len(ck) > 4000:
                continue
            # fortunes keep their line breaks (poems, dialogue); only normalise whitespace
            body = "\n".join(re.sub(r"[ \t]+", " ", l).strip() for l in ck.split("\n")).strip()
            body = re.sub(r"\n{3,}", "\n\n", body)
            if sum(c.isalpha() for c in body) < 20:
                continue
            if sum(ord(c) > 127 for c in body) > 0.02 * len(body) or "\x08" in body:
                continue
            docs.append((pkg, body))
            if len(body) < 400:
                chat_src["fortune"].append(body)

# jargon file
jt = read(os.path.join(X, "jargon-text/usr/share/doc/jargon-text/jargon.txt.gz"))
start = jt.find("Welcome to the Jargon File", jt.find("Welcome to the Jargon File") + 10)
jt = jt[start:]
parts = re.split(r"\n\s*:([^:\n]{1,60}):([^\n]*)\n", jt)
intro = parts[0]
for ch in re.split(r"\n\s*Chapter \d+\.", intro):
    add("jargon-text", re.sub(r"\{([^}]*)\}", r"\1", ch))
for k in range(1, len(parts) - 2, 3):
    term, head, body = parts[k].strip(), parts[k + 1].strip(), parts[k + 2]
    body = re.sub(r"\{([^}]*)\}", r"\1", body)
    body = re.split(r"\n\s*(Appendix [A-Z]\.|Bibliography)", body)[0]
    text = reflow(body)
    if not text:
        continue
    docs.append(("jargon-text", f"{term}{(': ' + head) if head else ''}\n\n{text}"))
    first = re.sub(r"^\[[^\]]*\]\s*", "", text.split("\n\n")[0 if not text.startswith("[") else min(1, text.count("\n\n"))])
    first = re.sub(r"^1\.\s*", "", first)
    if 40 <= len(first) <= 600:
        chat_src["jargon"].append((term, first))

# manual pages (groff)
man_files = []
for pkg in ("manpages", "manpages-dev"):
    for p in files(pkg, "usr/share/man", r"^man\d/[^/]+\.\d\w*(\.gz)?$"):
        man_files.append((pkg, p))
with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
    for (pkg, p), (text, name_line) in zip(man_files, ex.map(lambda a: man_to_text(a[1]), man_files)):
        if text:
            add(pkg, text)
            sec = re.search(r"\.(\d)\w*(\.gz)?$", p).group(1)
            if name_line and " - " in name_line:
                chat_src["man"].append((sec, name_line))

# POD
for p in files("perl-doc", "usr/share/perl", r"pod/[^/]+\.pod$"):
    add("perl-doc", pod_to_text(read(p)))

# reStructuredText
for p in files("python3.11-doc", "usr/share/doc/python3.11/html/_sources", r"\.rst\.txt$",
               exclude=r"(whatsnew/changelog|^license|^copyright|^bugs)"):
    add("python3.11-doc", rst_to_text(read(p)))
for p in files("linux-doc-6.1", "usr/share/doc/linux-doc-6.1/Documentation", r"\.(rst|txt)(\.gz)?$",
               exclude=r"^(translations|ABI|devicetree|features|sphinx|output|netlink/specs)/|/(_sources|_static)/|\.yaml|^conf\.py"):
    if p.endswith((".txt", ".txt.gz")) and os.path.exists(re.sub(r"\.txt(\.gz)?$", ".rst.gz", p)):
        continue
    add("linux-doc-6.1", rst_to_text(read(p)))

# AsciiDoc
for p in files("git-doc", "usr/share/doc/git-doc", r"\.txt$", exclude=r"^(RelNotes|technical/api-index|howto-index|cmds-|config/|includes/)"):
    add("git-doc", asciidoc_to_text(read(p)))

# plain text
for p in files("doc-debian", "usr/share/doc/debian", r"\.txt(\.gz)?$", exclude=r"FAQ"):
    add("doc-debian", read(p))

# HTML manuals
html_sets = [
    ("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html", r"\.html$", r"^(bookindex|index|release-\d)"),
    ("sqlite3-doc", "usr/share/doc/sqlite3", r"\.html$", r"(changes|releaselog|sitemap|keyword_index|toc|doclist|chronology|index)"),
    ("debian-handbook", "usr/share/doc/debian-handbook/html/en-US", r"\.html$", r"^(index|ix01)"),
    ("debian-reference-en", "usr/share/debian-reference", r"\.en\.html$", r"^index"),
    ("developers-reference", "usr/share/developers-reference", r"\.html$", r"^(index|genindex|search)"),
    ("maint-guide", "usr/share/doc/maint-guide/html", r"\.en\.html$", r"^index"),
    ("debian-policy", "usr/share/doc/debian-policy", r"\.html$", r"(genindex|search|index)\.html$"),
    ("debian-faq", "usr/share/doc/debian/FAQ", r"\.en\.html$", r"^index"),
    ("debian-history", "usr/share/doc/debian-history/docs", r"\.en\.html$", r"^index"),
    ("rust-doc", "usr/share/doc/rust-doc/html",
     r"^(book|reference|rust-by-example|nomicon|edition-guide|embedded-book|rustc|rustdoc)/.*\.html$",
     r"(^|/)(print|toc|SUMMARY|index|searchindex)\.html$"),
    ("python-django-doc", "usr/share/doc/python-django-doc/html", r"\.html$",
     r"^(_modules|_static|_sources|releases)/|(genindex|py-modindex|search|contents|index)\.html$"),
    ("apache2-doc", "usr/share/doc/apache2-doc/manual", r"\.html$",
     r"^(?!(en/|[^/]+\.html$)).*|(^|/)(index|sitemap|glossary|quickreference|directives)\.html$"),
    ("postfix-doc", "usr/share/doc/postfix/html", r"\.html$", r"(index|postconf\.5)\.html$"),
]
for pkg, sub, pat, exc in html_sets:
    for p in files(pkg, sub, pat, exclude=exc):
        add(pkg, html_to_text(read(p)))

# ---------------------------------------------------------------- synthetic chat (ChatML)
rng = random.Random(20251129)
def chat(user, answer, system=None):
    s = ""
    if system:
        s += f"<|im_start|>system\n{system}<|im_end|>\n"
    return s + f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n"
SYSTEMS = ["You are a helpful assistant.", "You are a small demo model. Answer briefly.", "Answer the question."]
Q_FORTUNE = ["Tell me a fortune.", "Give me a quote.", "Say something clever.", "Tell me something interesting.",
             "Can you give me a fortune cookie?", "Share a saying with me.", "Tell me a joke."]
Q_MAN = {"1": ["What does the {n} command do?", "What is {n}?", "Explain the {n} command."],
         "2": ["What does the {n} system call do?", "What is {n}?"],
         "3": ["What does the {n} function do?", "What is {n}?"],
         "4": ["What is {n}?"], "5": ["What is {n}?", "What is the {n} file?"],
         "7": ["What is {n}?", "Tell me about {n}."], "8": ["What does {n} do?", "What is {n}?"]}
chat_docs = []
for ck in chat_src["fortune"]:
    if rng.random() < 0.5:
        chat_docs.append(chat(rng.choice(Q_FORTUNE), ck, rng.choice(SYSTEMS) if rng.random() < 0.3 else None))
for term, first in chat_src["jargon"]:
    q = rng.choice(["What does \"{t}\" mean?", "What is {t}?", "Define {t}.", "What does {t} mean in hacker slang?"]).format(t=term)
    chat_docs.append(chat(q, first, rng.choice(SYSTEMS) if rng.random() < 0.3 else None))
for sec, nl in chat_src["man"]:
    names, desc = nl.split(" - ", 1)
    n = names.split(",")[0].strip()
    desc = desc.strip().rstrip(".")
    if not n or not desc:
        continue
    q = rng.choice(Q_MAN.get(sec, ["What is {n}?"])).format(n=n)
    chat_docs.append(chat(q, f"{n}: {desc[0].upper() + desc[1:]}.", rng.choice(SYSTEMS) if rng.random() < 0.3 else None))
for c in chat_docs:
    docs.append(("synthetic-chat", c))

# ---------------------------------------------------------------- dedupe, filter, write
seen_par, seen_doc = set(), set()
final = []
stats = {}
for pkg, text in docs:
    if pkg not in ("synthetic-chat",) and not pkg.startswith("fortunes"):
        kept = []
        for par in text.split("\n\n"):
            if len(par) >= 40:
                h = hashlib.sha1(re.sub(r"\W+", " ", par.lower()).encode()).digest()
                if h in seen_par:
                    continue
                seen_par.add(h)
            kept.append(par)
        text = "\n\n".join(kept)
        if sum(c.isalpha() for c in text) < 200:
            continue
    nonascii = sum(ord(c) > 127 for c in text)
    if nonascii > 0.03 * len(text):
        continue
    if "<|" in text and pkg != "synthetic-chat":
        text = text.replace("<|", "< |")
    h = hashlib.sha1(re.sub(r"\s+", " ", text.lower()).encode()).digest()
    if h in seen_doc:
        continue
    seen_doc.add(h)
    final.append((pkg, text))
    st = stats.setdefault(pkg, {"documents": 0, "chars": 0})
    st["documents"] += 1
    st["chars"] += len(text)

rng.shuffle(final)
os.makedirs(outdir, exist_ok=True)
raw = ("\n" + EOT + "\n").join(t for _, t in final) + "\n"
with open(os.path.join(outdir, "corpus.txt.gz"), "wb") as f:
    with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0, filename="") as g:
        g.write(raw.encode("utf-8"))

pk = [l.rstrip("\n").split("\t") for l in open(os.path.join(work, "packages.tsv"))]
total_chars = sum(s["chars"] for s in stats.values())
meta = {"total_documents": len(final), "total_chars": total_chars,
        "total_bytes_utf8": len(raw.encode("utf-8")), "sources": {}}
with open(os.path.join(outdir, "corpus_sources.txt"), "w") as f:
    f.write("# Debian 12 (bookworm) packages used for the radixserve demo model's training corpus\n")
    f.write("# package\tversion\tsection\tlicense\tdocuments\tcharacters\n")
    for p, ver, sec, deb, lic in pk:
        st = stats.get(p, {"documents": 0, "chars": 0})
        f.write(f"{p}\t{ver}\t{sec}\t{lic}\t{st['documents']}\t{st['chars']}\n")
        meta["sources"][p] = {"version": ver, "section": sec, "license": lic, **st}
    st = stats.get("synthetic-chat", {"documents": 0, "chars": 0})
    f.write(f"synthetic-chat\t-\t-\tderived from the packages above (fortunes, jargon-text, manpages, manpages-dev)\t{st['documents']}\t{st['chars']}\n")
    meta["sources"]["synthetic-chat"] = {"license": "derived from fortunes, jargon-text, manpages, manpages-dev", **st}
    f.write(f"# total\t{len(final)} documents\t{total_chars} characters\t{meta['total_bytes_utf8']} bytes\n")
with open(os.path.join(outdir, "corpus_stats.json"), "w") as f:
    json.dump(meta, f, indent=1)
print(open(os.path.join(outdir, "corpus_sources.txt")).read(), file=sys.stderr)
PYEOF

# keep the licenses next to the corpus
mkdir -p "$outdir/copyright"
while IFS=$'\t' read -r p _; do
  c=$(find "$work/x/$p/usr/share/doc" -name copyright -path "*/$p/copyright" | head -n1 || true)
  [ -n "$c" ] || c=$(find "$work/x/$p/usr/share/doc" -name copyright | head -n1 || true)
  if [ -n "$c" ]; then cp "$c" "$outdir/copyright/$p.copyright"; fi
done <"$work/packages.tsv"
ls -l "$outdir"/corpus.txt.gz >&2
echo "prepare_demo_corpus: done -> $outdir" >&2

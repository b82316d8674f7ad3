"""Deterministic generator of a realistic markdown corpus for benchmarks.

`python -m bench.lib.corpus OUT_DIR --files 10000 --seed 1` writes ~10,000 files totalling ~80 MB
(8 KiB on average, log-normal sizes, a few files of 200-400 KB, none over 400 KB) in nested
directories of ~100 files each. Each file has ATX headings of levels 1-4, paragraphs drawn
from a Zipf-distributed vocabulary (common English words plus a few thousand pseudo-words),
bullet lists and fenced code blocks with a language. Same arguments, same bytes.
Stdlib only, so any interpreter runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

MEAN_BYTES = 8192
MAX_BYTES = 400_000
FILES_PER_DIR = 100
POOL_WORDS = 1_000_000
OVERSHOOT = 450  # a document ends on a whole section: stop about half a section early
PSEUDO_WORDS = 4000
ZIPF_S = 1.0
ZIPF_Q = 1.0  # Zipf-Mandelbrot offset: "the" gets ~5% of the prose words, as in English

# Common English words, roughly in frequency order (they take the top Zipf ranks).
COMMON = (
    "the of and to a in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "more out up can said about other into than its time only could new them some these then two "
    "first may any like now my such make over our even most after also made many did before must "
    "through back years where much your way well down should because each just those how too "
    "little state good very make world still own see men work long get here between both life "
    "being under never day same another know while last might us great old year off come since "
    "against go came right used take three states himself few house use during without again place "
    "around however home small found thought went say part once general high upon school every "
    "does got united left number course war until always away something fact though water less "
    "public put think almost hand enough far took head yet government system better set told "
    "nothing night end why called didn find look asked later knew point next program city business "
    "give group toward young let room side social present given several order national second "
    "possible rather per face among form important often things looked early white case large need "
    "big four within felt along children saw best church ever least power development light thing "
    "service data file index query server worker queue store document search chunk vector result "
    "config error request response cache token model batch stream table column value record update"
).split()
# A few non-ASCII words so UTF-8 decoding is exercised (rare: they sit at low Zipf ranks).
ACCENTED = ["café", "naïve", "résumé", "Zürich", "façade", "coördinate", "jalapeño", "São"]

ONSETS = ["b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
          "br", "ch", "cl", "dr", "gr", "pl", "qu", "sh", "st", "th", "tr", "vr"]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ou", "y"]
CODAS = ["", "", "", "n", "r", "l", "s", "t", "x", "nd", "rk", "st"]
LANGUAGES = ["python", "bash", "yaml", "json", "sql", "go", "javascript", "toml"]


@dataclass(frozen=True)
class Stats:
    """What one `generate` call wrote."""

    files: int
    dirs: int
    total_bytes: int
    min_bytes: int
    max_bytes: int
    headings: int
    code_blocks: int
    seconds: float

    @property
    def mean_bytes(self) -> float:
        """Average file size in bytes."""
        return self.total_bytes / self.files if self.files else 0.0


def vocabulary(seed: int = 0) -> list[str]:
    """Return the vocabulary in Zipf rank order: common English first, then pseudo-words."""
    rng = random.Random(f"vocabulary-{seed}")
    pseudo: set[str] = set()
    while len(pseudo) < PSEUDO_WORDS:
        syllables = rng.choice((1, 2, 2, 2, 2, 3, 3))
        word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(syllables))
        pseudo.add(word + rng.choice(CODAS))
    ranked = sorted(pseudo - set(COMMON))
    rng.shuffle(ranked)
    head = list(dict.fromkeys(COMMON))
    # Interleave: the 100 most common English words lead, then English and pseudo-words mix.
    tail = head[100:] + ranked[: len(head)]
    rng.shuffle(tail)
    words = head[:100] + tail + ranked[len(head):]
    for i, word in enumerate(ACCENTED):
        words.insert(1500 + 300 * i, word)
    return words


def word_pool(size: int, seed: int) -> list[str]:
    """Draw `size` words from the vocabulary with Zipf-Mandelbrot weights 1/(rank+q)**s."""
    words = vocabulary()
    cumulative: list[float] = []
    total = 0.0
    for rank in range(1, len(words) + 1):
        total += 1.0 / (rank + ZIPF_Q) ** ZIPF_S
        cumulative.append(total)
    return random.Random(f"pool-{seed}").choices(words, cum_weights=cumulative, k=size)


def sample_queries(n: int, seed: int = 1, terms: tuple[int, int] = (2, 4)) -> list[str]:
    """Return `n` queries of 2-4 words drawn from mid-frequency ranks (typical search terms)."""
    words = vocabulary()[100:2000]
    rng = random.Random(f"queries-{seed}")
    return [" ".join(rng.sample(words, rng.randint(*terms))) for _ in range(n)]


class _Writer:
    """Builds markdown text from a shared word pool with one seeded RNG."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"text-{seed}")
        self.pool = word_pool(POOL_WORDS, seed)
        stop = set(vocabulary()[:100])
        # Headings, file names and identifiers use content words (no top-100 function words).
        self.content = [w for w in self.pool[:300_000] if w not in stop]
        self.headings = 0
        self.code_blocks = 0

    def words(self, lo: int, hi: int) -> str:
        """Return a run of lo..hi consecutive pool words."""
        rnd = self.rng.random
        n = lo + int(rnd() * (hi - lo + 1))
        o = int(rnd() * (POOL_WORDS - n))
        return " ".join(self.pool[o : o + n])

    def terms(self, lo: int, hi: int) -> str:
        """Return lo..hi content words (no common function words)."""
        n = lo + int(self.rng.random() * (hi - lo + 1))
        o = int(self.rng.random() * (len(self.content) - n))
        return " ".join(self.content[o : o + n])

    def sentence(self) -> str:
        """Return one capitalised sentence, sometimes with inline code or emphasis."""
        s = self.words(6, 20)
        r = self.rng.random()
        if r < 0.04:
            s += f" using `{self.terms(2, 2).replace(' ', '_')}`"
        elif r < 0.07:
            s += f" **{self.terms(1, 2)}**"
        elif r < 0.09:
            s += f" ([{self.terms(1, 3)}](../{self.terms(1, 1)}.md))"
        return s[0].upper() + s[1:] + ("?" if r > 0.97 else ".")

    def paragraph(self) -> str:
        """Return a paragraph of 2-7 sentences."""
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 7)))

    def bullets(self) -> str:
        """Return a bullet or numbered list of 3-8 items."""
        rng = self.rng
        n = rng.randint(3, 8)
        if rng.random() < 0.2:
            return "\n".join(f"{i}. {self.words(3, 12)}" for i in range(1, n + 1))
        mark = "-" if rng.random() < 0.8 else "*"
        return "\n".join(f"{mark} {self.words(3, 12)}" for _ in range(n))

    def code(self) -> str:
        """Return a fenced code block with a language tag and 3-20 code-like lines."""
        rng = self.rng
        lang = rng.choice(LANGUAGES)

        def w() -> str:
            return self.terms(1, 1)

        lines: list[str] = []
        for _ in range(rng.randint(3, 20)):
            k = rng.random()
            if lang == "python":
                lines.append(f"def {w()}_{w()}({w()}, {w()}):" if k < 0.2
                             else f"    {w()} = {w()}.{w()}({rng.randint(0, 999)})")
            elif lang == "bash":
                lines.append(f"{w()} --{w()} {w()}/{w()}.md | grep {w()}")
            elif lang == "yaml":
                lines.append(f"{'  ' if k < 0.5 else ''}{w()}: {w() if k < 0.7 else rng.randint(0, 9999)}")
            elif lang == "json":
                lines.append(f'  "{w()}": {rng.randint(0, 9999) if k < 0.5 else json.dumps(w())},')
            elif lang == "sql":
                lines.append(f"SELECT {w()}, {w()} FROM {w()} WHERE {w()} = {rng.randint(0, 99)};")
            elif lang == "go":
                lines.append(f"\t{w()} := {w()}.{w().capitalize()}({w()}, {rng.randint(0, 99)})")
            elif lang == "javascript":
                lines.append(f"const {w()} = await {w()}.{w()}({json.dumps(w())});")
            else:
                lines.append(f"{w()} = {json.dumps(w()) if k < 0.6 else rng.randint(0, 999)}")
        self.code_blocks += 1
        return f"```{lang}\n" + "\n".join(lines) + "\n```"

    def heading(self, level: int) -> str:
        """Return an ATX heading of the given level."""
        self.headings += 1
        text = self.terms(1, 5)
        return "#" * level + " " + text[0].upper() + text[1:]

    def document(self, target: int) -> str:
        """Return one markdown document of roughly `target` characters."""
        rng = self.rng
        parts = [self.heading(1), self.paragraph()]
        size = len(parts[0]) + len(parts[1])
        level = 1
        while size < target - OVERSHOOT:
            # Headings nest properly: go one deeper (max 4) or back up to 2 or 3.
            r = rng.random()
            level = min(level + 1, 4) if r < 0.35 else (2 if r < 0.75 else min(3, level + 1))
            block = [self.heading(level)]
            for _ in range(rng.randint(1, 3)):
                k = rng.random()
                block.append(self.paragraph() if k < 0.62 else self.bullets() if k < 0.82 else self.code())
            text = "\n\n".join(block)
            parts.append(text)
            size += len(text) + 2
        return "\n\n".join(parts) + "\n"


def _sizes(files: int, rng: random.Random) -> list[int]:
    """Return deterministic target sizes: log-normal, a few large ones, mean MEAN_BYTES."""
    sigma = 0.85
    sizes = [rng.lognormvariate(0.0, sigma) for _ in range(files)]
    big = max(1, files // 1000) if files >= 50 else 0
    for i in rng.sample(range(files), big):
        sizes[i] = -rng.uniform(200_000, MAX_BYTES - 4_000)  # negative marks a fixed size
    fixed = sum(-s for s in sizes if s < 0)
    free = sum(s for s in sizes if s > 0)
    scale = max(MEAN_BYTES * files - fixed, files * 300) / free if free else 0.0
    return [int(-s) if s < 0 else max(200, min(int(s * scale), MAX_BYTES - 4_000)) for s in sizes]


def _relative_dir(d: int, rng: random.Random, names: list[str]) -> Path:
    """Return the nested directory (2 or 3 levels) of leaf directory number d."""
    area, topic = divmod(d, 10)
    path = Path(f"{names[area % len(names)]}-{area:02d}") / f"{names[(topic * 7 + area) % len(names)]}-{topic}"
    if rng.random() < 0.5:
        path = path / names[(d * 13) % len(names)]
    return path


def generate(out_dir: Path, files: int, seed: int) -> Stats:
    """Write `files` markdown files under out_dir (overwriting same-named files); return Stats."""
    start = time.perf_counter()
    out_dir = Path(out_dir)
    rng = random.Random(f"layout-{seed}")
    writer = _Writer(seed)
    names = vocabulary()[300:800]
    sizes = _sizes(files, rng)
    total = 0
    smallest = math.inf
    largest = 0
    dirs: set[Path] = set()
    current = out_dir
    for i, target in enumerate(sizes):
        if i % FILES_PER_DIR == 0:
            current = out_dir / _relative_dir(i // FILES_PER_DIR, rng, names)
            current.mkdir(parents=True, exist_ok=True)
            dirs.add(current)
        data = writer.document(target).encode("utf-8")
        stem = writer.terms(1, 3).replace(" ", "-").lower()
        (current / f"{i:05d}-{stem}.md").write_bytes(data)
        total += len(data)
        smallest = min(smallest, len(data))
        largest = max(largest, len(data))
    return Stats(
        files=files,
        dirs=len(dirs),
        total_bytes=total,
        min_bytes=int(smallest) if files else 0,
        max_bytes=largest,
        headings=writer.headings,
        code_blocks=writer.code_blocks,
        seconds=round(time.perf_counter() - start, 3),
    )


def sample_chunks(n: int, seed: int = 1, size: int = 800) -> list[str]:
    """Return `n` realistic chunk texts of about `size` characters (heading plus body)."""
    writer = _Writer(seed)
    chunks: list[str] = []
    for _ in range(n):
        parts = [writer.heading(writer.rng.randint(2, 4))]
        length = len(parts[0])
        while length < size:
            k = writer.rng.random()
            part = writer.paragraph() if k < 0.7 else writer.bullets() if k < 0.9 else writer.code()
            parts.append(part)
            length += len(part) + 2
        chunks.append("\n\n".join(parts)[:size])
    return chunks


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: generate a corpus and print its Stats as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.files < 1:
        parser.error("--files must be at least 1")
    stats = generate(args.out_dir, args.files, args.seed)
    print(json.dumps({**asdict(stats), "mean_bytes": round(stats.mean_bytes)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

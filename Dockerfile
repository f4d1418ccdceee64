# Multi-stage build: a full Rust toolchain to compile, a minimal Debian runtime to run.
FROM rust:1.95-bookworm AS build
WORKDIR /src
# git2's https transport links OpenSSL; Lua 5.1 (health-script checks), libgit2 and mimalloc are built from C.
RUN apt-get update && apt-get install -y --no-install-recommends pkg-config libssl-dev && rm -rf /var/lib/apt/lists/*
COPY . .
# Stripped: the unstripped binary is ~130 MB, the stripped one ~22 MB.
# Without the `embedded` feature: the production controller carries no emulated cluster.
RUN cargo build --release --locked --no-default-features --bin tollgate && strip target/release/tollgate

FROM debian:bookworm-slim
# ca-certificates: https git remotes and the API server; libssl3: git2's TLS.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates libssl3 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 65532 --home-dir /var/lib/tollgate --create-home tollgate
COPY --from=build /src/target/release/tollgate /usr/local/bin/tollgate
USER 65532:65532
WORKDIR /var/lib/tollgate
ENTRYPOINT ["/usr/local/bin/tollgate"]
CMD ["run", "--help"]

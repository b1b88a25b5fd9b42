# syntax=docker/dockerfile:1
# The master image: /usr/local/bin/lancemaster, run as `serve`. Build from
# the repository root with `make image` (docs/operations.md, "Containers").
# The same binary is the CLI: `docker run --rm IMAGE --address ... jobs list`.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# There is no .git in the build context: make image passes what
# `lancemaster version` and lancemaster_build_info report.
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILD_DATE=
RUN CGO_ENABLED=0 make build BIN=/out/lancemaster VERSION="${VERSION}" REVISION="${REVISION}" BUILD_DATE="${BUILD_DATE}"

FROM debian:bookworm-slim
# ca-certificates: object stores over HTTPS. uid/gid 10001 as in
# deploy/kubernetes (runAsUser) and deploy/systemd (user lancemaster).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 lancemaster \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/lancemaster --shell /usr/sbin/nologin lancemaster \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/lancemaster
COPY --from=build /out/lancemaster /usr/local/bin/lancemaster
USER 10001:10001
# raft, rpc (Thrift admin API and reports), http (/metrics, /livez, /readyz)
EXPOSE 7000 9090 9100
VOLUME ["/var/lib/lancemaster"]
ENTRYPOINT ["/usr/local/bin/lancemaster"]
CMD ["serve", "--config=/etc/lancemaster/master.yaml"]

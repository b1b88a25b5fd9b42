# lancemaster — see README.md
GO      ?= go
MODULE  := github.com/lancemaster/lancemaster
BIN     := bin/lancemaster
THRIFT  ?= thrift
IDL     := idl/wire.thrift idl/admin.thrift idl/journal.thrift

.PHONY: build test gen bench demo demo-down vet fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/lancemaster

gen:
	rm -rf gen-go/wire gen-go/adminapi gen-go/journal
	@for f in $(IDL); do \
	  $(THRIFT) --gen go:package_prefix=$(MODULE)/gen-go/,skip_remote -out gen-go $$f || exit 1; \
	done
	gofmt -w gen-go

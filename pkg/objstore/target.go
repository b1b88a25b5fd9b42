// Package objstore checks that an object store honours conditional PUT
// before any request of a backend touches a dataset on it.
//
// Lance commits a new dataset version by writing its manifest with a PUT
// that must fail when the object already exists (If-None-Match: *). A store
// that ignores the header answers both of two concurrent commits with
// success and one of them is silently lost. The probe writes a unique
// object with If-None-Match: *, writes it again with the same header and
// expects 412 Precondition Failed, then deletes it (Probe). A Cache keeps
// the verdict per (endpoint, bucket) for a bounded time.
//
// The storage options are the ones the builder gets (docs/object-storage.md
// lists the keys the probe reads). No error or detail of this package
// carries an option's value.
package objstore

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Scheme kinds of a dataset or catalog URI.
const (
	KindLocal = "local"
	KindS3    = "s3"
	KindGCS   = "gs"
	KindAzure = "az"
)

// Kind classifies a URI: KindLocal for an absolute path or file://, KindS3,
// KindGCS or KindAzure for s3://, gs:// and az:// (the builder's object
// stores), "" for anything else.
func Kind(uri string) string {
	if strings.HasPrefix(uri, "/") {
		return KindLocal
	}
	scheme, _, ok := strings.Cut(uri, "://")
	if !ok {
		return ""
	}
	switch s := strings.ToLower(scheme); s {
	case "file":
		return KindLocal
	case KindS3, KindGCS, KindAzure:
		return s
	}
	return ""
}

// IsObjectStore reports whether uri names a dataset or root on an object
// store.
func IsObjectStore(uri string) bool {
	k := Kind(uri)
	return k == KindS3 || k == KindGCS || k == KindAzure
}

// Target is where an S3 probe goes.
type Target struct {
	// Endpoint is the base URL (aws_endpoint, or AWS's regional endpoint).
	Endpoint string
	Region   string
	Bucket   string
	// Dir is the key prefix the probe object is written under ("" for the
	// bucket's root; no leading or trailing slash).
	Dir string
	// PathStyle addresses the bucket in the path (the builder's default);
	// false means virtual-hosted style.
	PathStyle bool

	accessKey, secretKey, sessionToken string
}

// CacheKey is the (endpoint, bucket) the verdict is kept for.
func (t Target) CacheKey() string { return t.Endpoint + " " + t.Bucket }

// Where names the target for messages: the endpoint and the bucket, never
// a credential.
func (t Target) Where() string { return fmt.Sprintf("s3://%s at %s", t.Bucket, t.Endpoint) }

// HasKeys reports whether the options carried an access key pair.
func (t Target) HasKeys() bool { return t.accessKey != "" && t.secretKey != "" }

// descriptive are the options a message may name with their value: where
// the store is and how it is addressed, never a credential.
var descriptive = []string{"aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url", "aws_region", "region",
	"aws_default_region", "allow_http", "aws_allow_http", "aws_virtual_hosted_style_request", "virtual_hosted_style_request"}

// IsDescriptiveOption reports whether key (compared without case) is one
// whose value may appear in a message: the endpoint, the region,
// allow_http or the addressing style.
func IsDescriptiveOption(key string) bool {
	for _, d := range descriptive {
		if strings.EqualFold(key, d) {
			return true
		}
	}
	return false
}

// option reads the first of the keys present (keys compared without case,
// as object_store does).
func option(opts map[string]string, keys ...string) (string, bool) {
	for _, want := range keys {
		for k, v := range opts {
			if strings.EqualFold(k, want) {
				return v, true
			}
		}
	}
	return "", false
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}

// S3Target reads an s3:// URI and the storage options. For a dataset URI
// (ending in <name>.lance) the probe goes to its parent; for a root, under
// the root. Errors name the option, never its value.
func S3Target(uri string, opts map[string]string) (Target, error) {
	if Kind(uri) != KindS3 {
		return Target{}, errors.New("not an s3:// URI")
	}
	_, rest, _ := strings.Cut(uri, "://")
	bucket, key, _ := strings.Cut(rest, "/")
	if bucket == "" || strings.ContainsAny(bucket, "@?#") {
		return Target{}, errors.New("the s3:// URI needs a bucket name (and no user information, query or fragment)")
	}
	key = strings.Trim(key, "/")
	if strings.HasSuffix(key, ".lance") {
		if key = path.Dir(key); key == "." {
			key = ""
		}
	}
	t := Target{Bucket: bucket, Dir: key, PathStyle: true}
	t.Region, _ = option(opts, "aws_region", "region", "aws_default_region")
	if t.Region == "" {
		t.Region = "us-east-1"
	}
	if v, ok := option(opts, "aws_virtual_hosted_style_request", "virtual_hosted_style_request"); ok && truthy(v) {
		t.PathStyle = false
	}
	endpoint, ok := option(opts, "aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
	if !ok || endpoint == "" {
		endpoint = "https://s3." + t.Region + ".amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Target{}, errors.New("storage option aws_endpoint is not an http or https URL")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Target{}, errors.New("storage option aws_endpoint may not carry user information, a query or a fragment")
	}
	if u.Scheme == "http" {
		if v, _ := option(opts, "allow_http", "aws_allow_http"); !truthy(v) {
			return Target{}, errors.New("storage option aws_endpoint is plain http: set allow_http to true (as the builder requires)")
		}
	}
	t.Endpoint = strings.TrimSuffix(u.String(), "/")
	t.accessKey, _ = option(opts, "aws_access_key_id", "access_key_id")
	t.secretKey, _ = option(opts, "aws_secret_access_key", "secret_access_key")
	t.sessionToken, _ = option(opts, "aws_session_token", "session_token", "aws_token", "token")
	if (t.accessKey == "") != (t.secretKey == "") {
		return Target{}, errors.New("storage options need both aws_access_key_id and aws_secret_access_key, or neither")
	}
	return t, nil
}

// secrets are the option values that must never appear in a message.
func (t Target) secrets() []string {
	var out []string
	for _, s := range []string{t.accessKey, t.secretKey, t.sessionToken} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

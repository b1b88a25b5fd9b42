package objstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/pkg/s3test"
)

const canary = "PROBE-CANARY-7f3e21c9a0"

func check(t *testing.T, c *Checker, uri string, opts map[string]string) (Result, error) {
	t.Helper()
	return c.Check(context.Background(), uri, opts, 5*time.Second)
}

// A store that honours If-None-Match answers the second PUT 412: the
// verdict is true, both PUTs carried the header, and the probe object is
// gone afterwards.
func TestProbeHonouringStore(t *testing.T) {
	s := s3test.Start(t)
	res, err := check(t, &Checker{}, s.Root("prefix/db/items.lance"), s.StorageOptions(canary))
	if err != nil || !res.ConditionalPut {
		t.Fatalf("probe: %+v %v", res, err)
	}
	if !strings.Contains(res.Detail, "412") || strings.Contains(res.Detail, canary) {
		t.Fatalf("detail: %q", res.Detail)
	}
	if n := s.ConditionalPuts(); n != 2 {
		t.Fatalf("%d conditional PUTs, want 2", n)
	}
	if keys := s.Keys(t, ""); len(keys) != 0 {
		t.Fatalf("the probe left objects behind: %v", keys)
	}
	var under bool
	for _, r := range s.Requests() {
		under = under || strings.HasPrefix(r.Path, "/"+s3test.Bucket+"/prefix/db/"+ProbePrefix)
	}
	if !under {
		t.Fatalf("the probe object was not written under the dataset's parent: %+v", s.Requests())
	}
}

// A store that ignores If-None-Match accepts the second PUT: the verdict is
// false, and Require refuses it with the message that says why.
func TestProbeStoreIgnoringIfNoneMatch(t *testing.T) {
	s := s3test.StartIgnoringConditionalPut(t)
	c := &Checker{}
	res, err := check(t, c, s.Root("prefix"), s.StorageOptions(canary))
	if err != nil || res.ConditionalPut {
		t.Fatalf("probe: %+v %v", res, err)
	}
	err = c.Require(context.Background(), s.Root("prefix/db/items.lance"), s.StorageOptions(canary), time.Second)
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "does not honour conditional PUT (If-None-Match); Lance would lose concurrent commits") {
		t.Fatalf("Require: %v", err)
	}
	if keys := s.Keys(t, ""); len(keys) != 0 {
		t.Fatalf("the probe left objects behind: %v", keys)
	}
}

// Credentials refused (403, with a body that echoes the key id, as S3's
// InvalidAccessKeyId does), an unreachable endpoint and bad options are
// errors, not verdicts, and no message carries a credential.
func TestProbeErrorsCarryNoCredential(t *testing.T) {
	endpoint, hits := s3test.StartForbidden(t)
	forbidden := map[string]string{"aws_endpoint": endpoint, "allow_http": "true",
		"aws_access_key_id": canary, "aws_secret_access_key": canary + "-secret", "aws_session_token": canary + "-token"}

	deadAddr := testkit.Addr(testkit.Ports(t, 1)[0]) // reserved: nothing listens there
	unreachable := map[string]string{"aws_endpoint": "http://" + deadAddr, "allow_http": "true",
		"aws_access_key_id": canary, "aws_secret_access_key": canary}
	noHTTP := map[string]string{"aws_endpoint": "http://" + deadAddr, "aws_access_key_id": canary, "aws_secret_access_key": canary}
	halfKeys := map[string]string{"aws_endpoint": "http://" + deadAddr, "allow_http": "true", "aws_access_key_id": canary}

	c := &Checker{}
	for name, tc := range map[string]struct {
		opts map[string]string
		want string
	}{
		"forbidden":   {forbidden, "HTTP 403 InvalidAccessKeyId"},
		"unreachable": {unreachable, "cannot connect"},
		"plain http":  {noHTTP, "allow_http"},
		"half keys":   {halfKeys, "both aws_access_key_id and aws_secret_access_key"},
	} {
		res, err := check(t, c, "s3://bucket/prefix", tc.opts)
		if err == nil {
			t.Fatalf("%s: a verdict %+v, want an error", name, res)
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), canary) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if hits() != 1 {
		t.Fatalf("the 403 store saw %d requests; want the first PUT only", hits())
	}
	// Errors are not cached: the next call probes again.
	_, _ = check(t, c, "s3://bucket/prefix", forbidden)
	if hits() != 2 {
		t.Fatalf("a failed probe was cached (%d requests)", hits())
	}
}

// A verdict is kept per (endpoint, bucket) for the TTL, then probed again;
// another bucket on the same endpoint is probed on its own.
func TestCheckerCachesVerdictsPerEndpointAndBucket(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var probes []string
	c := &Checker{TTL: time.Minute, Now: func() time.Time { return now },
		Probe: func(_ context.Context, tg Target, _ time.Duration) (Result, error) {
			probes = append(probes, tg.CacheKey())
			return Result{ConditionalPut: true}, nil
		}}
	opts := map[string]string{"aws_endpoint": "http://127.0.0.1:9", "allow_http": "true"}
	for _, uri := range []string{"s3://a/x/t.lance", "s3://a/y", "s3://a"} {
		if _, err := check(t, c, uri, opts); err != nil {
			t.Fatal(err)
		}
	}
	if len(probes) != 1 {
		t.Fatalf("probes %v; want one for bucket a", probes)
	}
	_, _ = check(t, c, "s3://b/x", opts)
	now = now.Add(time.Minute)
	_, _ = check(t, c, "s3://a/x", opts)
	if len(probes) != 3 || probes[1] != "http://127.0.0.1:9 b" || probes[2] != "http://127.0.0.1:9 a" {
		t.Fatalf("probes %v", probes)
	}
}

// Local paths, gs:// and az:// need no probe; other schemes are errors.
func TestCheckWithoutProbe(t *testing.T) {
	c := &Checker{Probe: func(context.Context, Target, time.Duration) (Result, error) {
		t.Fatal("probed")
		return Result{}, nil
	}}
	for _, uri := range []string{"/data/lake", "file:///data/lake", "gs://b/p", "az://c/p"} {
		if res, err := check(t, c, uri, nil); err != nil || !res.ConditionalPut || res.Detail == "" {
			t.Errorf("%s: %+v %v", uri, res, err)
		}
	}
	for _, uri := range []string{"http://x/y", "db://x", "relative/path"} {
		if _, err := check(t, c, uri, nil); err == nil {
			t.Errorf("%s: no error", uri)
		}
	}
}

// S3Target reads the bucket, the probe's directory (a dataset's parent),
// the endpoint and the addressing style from the URI and the options.
func TestS3Target(t *testing.T) {
	for _, tc := range []struct {
		uri             string
		opts            map[string]string
		bucket, dir, ep string
		pathStyle       bool
	}{
		{"s3://b/p/db/t.lance", nil, "b", "p/db", "https://s3.us-east-1.amazonaws.com", true},
		{"s3://b/t.lance/", map[string]string{"REGION": "eu-west-1"}, "b", "", "https://s3.eu-west-1.amazonaws.com", true},
		{"s3://b/.hidden/t.lance", map[string]string{"endpoint": "http://minio:9000/", "allow_http": "TRUE"}, "b", ".hidden", "http://minio:9000", true},
		{"s3://b/root/", map[string]string{"aws_virtual_hosted_style_request": "true"}, "b", "root", "https://s3.us-east-1.amazonaws.com", false},
	} {
		tg, err := S3Target(tc.uri, tc.opts)
		if err != nil || tg.Bucket != tc.bucket || tg.Dir != tc.dir || tg.Endpoint != tc.ep || tg.PathStyle != tc.pathStyle {
			t.Errorf("%s: %+v %v", tc.uri, tg, err)
		}
	}
	for _, uri := range []string{"s3://", "s3:///p", "s3://user@b/p", "gs://b/p"} {
		if _, err := S3Target(uri, nil); err == nil {
			t.Errorf("%s: accepted", uri)
		}
	}
	if _, err := S3Target("s3://b/p", map[string]string{"aws_endpoint": "http://u:" + canary + "@h:1", "allow_http": "true"}); err == nil ||
		strings.Contains(err.Error(), canary) {
		t.Errorf("an endpoint with user information: %v", err)
	}
}

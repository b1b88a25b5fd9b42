package objstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of a Checker.
const (
	// DefaultTTL is how long a verdict is kept: a store reconfigured to
	// ignore If-None-Match is noticed within it.
	DefaultTTL = 10 * time.Minute
	// maxCached bounds the verdicts kept (one per endpoint and bucket).
	maxCached = 1024
)

// Checker answers whether the store of a URI honours conditional PUT,
// probing an S3 store at most once per (endpoint, bucket) per TTL. Only
// verdicts are kept; a probe that failed (unreachable, refused credentials)
// is tried again by the next call. Safe for concurrent use.
type Checker struct {
	// TTL of a verdict (DefaultTTL when zero).
	TTL time.Duration
	// Now replaces time.Now (tests).
	Now func() time.Time
	// Probe replaces ProbeS3 (tests).
	Probe func(ctx context.Context, t Target, timeout time.Duration) (Result, error)

	mu sync.Mutex
	m  map[string]cached
}

type cached struct {
	res     Result
	expires time.Time
}

// Check answers for uri with the storage options: a local file system and
// gs:// and az:// without a probe (Result.ConditionalPut true, saying why),
// s3:// by the probe or its cached verdict. An unsupported URI, bad options
// or a failed probe is an error (a *ProbeError for the probe).
func (c *Checker) Check(ctx context.Context, uri string, opts map[string]string, timeout time.Duration) (Result, error) {
	switch Kind(uri) {
	case KindLocal:
		return Result{ConditionalPut: true, Detail: "a local file system: Lance commits there with an atomic rename that fails when the target exists"}, nil
	case KindGCS:
		return Result{ConditionalPut: true, Detail: "Google Cloud Storage enforces write preconditions natively (ifGenerationMatch=0, used by Lance's commits); not probed"}, nil
	case KindAzure:
		return Result{ConditionalPut: true, Detail: "Azure Blob Storage enforces If-None-Match: * natively (used by Lance's commits); not probed"}, nil
	case KindS3:
	default:
		return Result{}, errors.New("the URI is not an absolute path, file://, s3://, gs:// or az://")
	}
	t, err := S3Target(uri, opts)
	if err != nil {
		return Result{}, err
	}
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[t.CacheKey()]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.res, nil
	}
	probe := c.Probe
	if probe == nil {
		probe = ProbeS3
	}
	res, err := probe(ctx, t, timeout)
	if err != nil {
		return Result{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cached{}
	}
	if len(c.m) >= maxCached {
		for k, v := range c.m {
			if !now.Before(v.expires) || len(c.m) >= maxCached {
				delete(c.m, k)
			}
		}
	}
	c.m[t.CacheKey()] = cached{res: res, expires: now.Add(c.ttl())}
	return res, nil
}

// Require is Check for a request about to touch the dataset: nil only when
// the store is vouched for. The error says what is wrong; for a store that
// ignores If-None-Match it is a *RefusedError.
func (c *Checker) Require(ctx context.Context, uri string, opts map[string]string, timeout time.Duration) error {
	res, err := c.Check(ctx, uri, opts, timeout)
	if err != nil {
		return err
	}
	if !res.ConditionalPut {
		return &RefusedError{Detail: res.Detail}
	}
	return nil
}

// RefusedError is a store that does not honour conditional PUT.
type RefusedError struct{ Detail string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the object store does not honour conditional PUT (If-None-Match); Lance would lose concurrent commits: %s", e.Detail)
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Checker) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return DefaultTTL
}

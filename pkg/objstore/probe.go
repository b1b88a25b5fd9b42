package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// DefaultProbeTimeout bounds one probe (three requests) when the caller
// gives none.
const DefaultProbeTimeout = 15 * time.Second

// ProbePrefix starts the name of every probe object.
const ProbePrefix = ".lancemaster-probe-"

// Result is a probe's verdict.
type Result struct {
	// ConditionalPut is true only when the store answered the second
	// If-None-Match: * PUT with 412 Precondition Failed.
	ConditionalPut bool
	// Detail says what was seen, for the operator. Never a credential.
	Detail string
}

// ProbeError is a probe that could not reach a verdict: the store was not
// reachable, refused the credentials, or answered something unexpected.
// Its message never carries a credential.
type ProbeError struct{ Msg string }

func (e *ProbeError) Error() string { return e.Msg }

// ProbeS3 runs the conditional-PUT probe on t: PUT a unique object with
// If-None-Match: *, PUT it again with the same header (412 expected), then
// DELETE it. The SDK's retries are off: every request is sent once, so a
// lost answer can never pass for a 412. A verdict (true or false) comes
// with a nil error; anything else is a *ProbeError.
func ProbeS3(ctx context.Context, t Target, timeout time.Duration) (Result, error) {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := newS3Client(t, timeout)
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	key := ProbePrefix + hex.EncodeToString(nonce[:])
	if t.Dir != "" {
		key = t.Dir + "/" + key
	}
	put := func() error {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key),
			Body: bytes.NewReader([]byte("lancemaster conditional PUT probe\n")), IfNoneMatch: aws.String("*")})
		return err
	}
	where := t.Where()
	if err := put(); err != nil {
		status, code := httpStatus(err)
		if status == http.StatusNotImplemented || code == "NotImplemented" {
			return Result{Detail: fmt.Sprintf("the object store at %s refuses If-None-Match on PUT (HTTP %d %s)", where, status, code)}, nil
		}
		return Result{}, t.probeError("the probe's first PUT", err)
	}
	second := put()
	deleted := t.deleteProbe(client, key)
	status, code := httpStatus(second)
	switch {
	case second == nil:
		return Result{Detail: fmt.Sprintf("the object store at %s accepted a second PUT with If-None-Match: * of an existing object "+
			"(it ignores the precondition)%s", where, deleted)}, nil
	case status == http.StatusPreconditionFailed:
		return Result{ConditionalPut: true, Detail: fmt.Sprintf("the object store at %s answered 412 Precondition Failed "+
			"to a second PUT with If-None-Match: *%s", where, deleted)}, nil
	case status == http.StatusNotImplemented || code == "NotImplemented":
		return Result{Detail: fmt.Sprintf("the object store at %s refuses If-None-Match on PUT (HTTP %d %s)%s", where, status, code, deleted)}, nil
	}
	return Result{}, t.probeError("the probe's second PUT", second)
}

// deleteProbe removes the probe object, on a context of its own (the
// probe's may have ended). It says so when the object is left behind.
func (t Target) deleteProbe(client *s3.Client, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)}); err != nil {
		return fmt.Sprintf("; the probe object %s could not be deleted (%s)", key, t.describe(err))
	}
	return ""
}

func newS3Client(t Target, timeout time.Duration) *s3.Client {
	var creds aws.CredentialsProvider = aws.AnonymousCredentials{}
	if t.HasKeys() {
		creds = credentials.NewStaticCredentialsProvider(t.accessKey, t.secretKey, t.sessionToken)
	}
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: timeout}).DialContext,
		TLSHandshakeTimeout: timeout, ResponseHeaderTimeout: timeout, MaxIdleConns: 2, IdleConnTimeout: time.Second}
	return s3.New(s3.Options{
		Region:                     t.Region,
		Credentials:                creds,
		BaseEndpoint:               aws.String(t.Endpoint),
		UsePathStyle:               t.PathStyle,
		HTTPClient:                 &http.Client{Transport: transport, Timeout: timeout},
		Retryer:                    aws.NopRetryer{},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// httpStatus is the HTTP status and the S3 error code of a failed call (0
// and "" when no answer came).
func httpStatus(err error) (int, string) {
	if err == nil {
		return 0, ""
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	return status, code
}

// describe turns an SDK error into words without echoing the server's
// message or the request (a message may quote a key id or a signature):
// the HTTP status and S3 error code, or the class of transport failure.
func (t Target) describe(err error) string {
	status, code := httpStatus(err)
	if status != 0 {
		s := fmt.Sprintf("HTTP %d", status)
		if code != "" && len(code) <= 64 {
			s += " " + code
		}
		return s
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "cannot connect: " + t.redact(oe.Err.Error())
	}
	return "no answer from the endpoint"
}

func (t Target) probeError(what string, err error) *ProbeError {
	msg := fmt.Sprintf("the object store at %s could not be probed: %s failed (%s)", t.Where(), what, t.describe(err))
	status, _ := httpStatus(err)
	if status == http.StatusForbidden || status == http.StatusUnauthorized {
		msg += "; check the catalog's credentials (aws_access_key_id, aws_secret_access_key, aws_session_token)"
	}
	return &ProbeError{Msg: t.redact(msg)}
}

// redact removes every credential value from s (a belt under the braces:
// no message is built from one).
func (t Target) redact(s string) string {
	for _, v := range t.secrets() {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

package clustercache

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DescribeError says what went wrong with a request to a target cluster in words that
// never come from the target (docs/design.md, "Messages"). A target is whatever server
// a tenant's kubeconfig names, any address the observer's pod can reach; whatever text it
// answers with (a response body, a Status message or reason, a certificate's names, the
// first bytes of an answer that is not HTTP) would reach the tenant through the messages
// the observer writes, so the observer would read other servers for the tenant. Every
// target error that reaches an entry's or hook's message, the Healthy condition or an
// Event goes through this function; logs keep the whole error.
//
// The description is:
//   - an answer with an API status: its HTTP code and Kubernetes reason, such as
//     "403 Forbidden" or "503 ServiceUnavailable" (a reason that Kubernetes does not
//     define, or a code out of range, is left out);
//   - a failure to talk to the server: a fixed class, such as "connection refused",
//     "timeout", "TLS error", "host not found", "connection closed" or "connection failed";
//   - an answer that does not decode: "undecodable answer";
//   - an ErrClusterNotConnected: the cache's own words, with the target's error at the
//     end replaced by its description ("cluster not connected: Cluster ns/c did not
//     answer (…): connection refused"), or "cluster not connected: <description>" when the
//     target's error is not at the end;
//   - a read that the read identity may not make (ForbiddenError): its own words, the
//     identity and the command that grants the read;
//   - an answer larger than MaxAnswerBytes: "the answer is larger than 16 MiB";
//   - anything else: "unexpected error".
func DescribeError(err error) string {
	if err == nil {
		return ""
	}
	var forbidden *ForbiddenError
	if errors.As(err, &forbidden) {
		return forbidden.Error()
	}
	target := targetPart(err)
	notConnected := errors.Is(err, ErrClusterNotConnected)
	switch {
	case target == nil && notConnected:
		// Every ErrClusterNotConnected that carries no target error is made in the
		// cache's own words (a missing Secret or key, a kubeconfig that does not parse,
		// a stopped cache).
		return err.Error()
	case target == nil:
		return describeOther(err)
	}
	class := describeTarget(target)
	if !notConnected {
		return class
	}
	if prefix, ok := strings.CutSuffix(err.Error(), target.Error()); ok && strings.HasPrefix(prefix, ErrClusterNotConnected.Error()) {
		return prefix + class
	}
	return ErrClusterNotConnected.Error() + ": " + class
}

// targetPart returns the outermost error in err's chain that a target made: an API
// status, or a transport error of the request. nil when there is none.
func targetPart(err error) error {
	var status apierrors.APIStatus
	var uerr *url.Error
	var nerr net.Error
	var found error
	// The outermost of the kinds: their texts contain what they wrap.
	for _, e := range []error{asErr(err, &status), asErr(err, &uerr), asErr(err, &nerr)} {
		if e != nil && (found == nil || strings.Contains(e.Error(), found.Error())) {
			found = e
		}
	}
	if found == nil && errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return found
}

// asErr is errors.As returning the match as an error (nil when none).
func asErr[T any](err error, target *T) error {
	if !errors.As(err, target) {
		return nil
	}
	e, _ := any(*target).(error)
	return e
}

// describeTarget describes an error that a target made (targetPart).
func describeTarget(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return describeStatus(status.Status())
	}
	return describeTransport(err)
}

// describeStatus is the HTTP code and the Kubernetes reason of an answer, each only when
// it is one that HTTP or Kubernetes defines.
func describeStatus(s metav1.Status) string {
	code := ""
	if s.Code >= 100 && s.Code <= 599 {
		code = fmt.Sprint(s.Code)
	}
	reason := ""
	if knownReasons[s.Reason] {
		reason = string(s.Reason)
	}
	if s.Reason == metav1.StatusReasonForbidden {
		return describeForbidden(code)
	}
	return joinCodeReason(code, reason)
}

// describeForbidden is the description of a 403 Forbidden answer (code is its code, ""
// when out of range): the one place that says more about a refusal, such as the identity
// that was refused.
func describeForbidden(code string) string {
	return joinCodeReason(code, string(metav1.StatusReasonForbidden))
}

func joinCodeReason(code, reason string) string {
	switch {
	case code != "" && reason != "":
		return code + " " + reason
	case code != "":
		return code
	case reason != "":
		return reason
	}
	return "an error answer"
}

// knownReasons are the reasons of metav1.Status that Kubernetes defines.
var knownReasons = map[metav1.StatusReason]bool{
	metav1.StatusReasonUnauthorized: true, metav1.StatusReasonForbidden: true, metav1.StatusReasonNotFound: true,
	metav1.StatusReasonAlreadyExists: true, metav1.StatusReasonConflict: true, metav1.StatusReasonGone: true,
	metav1.StatusReasonInvalid: true, metav1.StatusReasonServerTimeout: true, metav1.StatusReasonStoreReadError: true,
	metav1.StatusReasonTimeout: true, metav1.StatusReasonTooManyRequests: true, metav1.StatusReasonBadRequest: true,
	metav1.StatusReasonMethodNotAllowed: true, metav1.StatusReasonNotAcceptable: true,
	metav1.StatusReasonRequestEntityTooLarge: true, metav1.StatusReasonUnsupportedMediaType: true,
	metav1.StatusReasonInternalError: true, metav1.StatusReasonExpired: true, metav1.StatusReasonServiceUnavailable: true,
}

// describeTransport is the class of a request that got no API answer, from the types and
// sentinels of the error chain, never its text.
func describeTransport(err error) string {
	var dns *net.DNSError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var nerr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return "host not found"
	case errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &verify) || errors.As(err, &record) ||
		errors.As(err, &alert) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid):
		return "TLS error"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()):
		return "timeout"
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	return "connection failed"
}

// describeOther describes an error that is neither an answer nor a transport failure:
// an answer that did not decode (client-go quotes it), or anything else.
func describeOther(err error) string {
	var tooLarge tooLargeError
	if errors.As(err, &tooLarge) {
		return tooLarge.Error() // the cache's own words: the bound that was passed
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if runtime.IsMissingKind(err) || runtime.IsMissingVersion(err) || errors.As(err, &syntax) || errors.As(err, &typ) {
		return "undecodable answer"
	}
	return "unexpected error"
}

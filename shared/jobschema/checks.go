package jobschema

import (
	"fmt"
	"net/url"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/timezone"
)

// The limits of the original service that the schema cannot express (reference, section 5.1).
const (
	MaxJobSize          = 16 * 1024 // bytes of a job or collection document
	MaxHeaderChars      = 4096      // names and values of an HTTP action's headers together
	MaxRetryInterval    = 548 * 24 * time.Hour
	DefaultMinRetryWait = 15 * time.Second
)

// checker holds the rules that need Go: texts that must parse (times, durations, zones,
// URLs), sums over several fields, and which states a client may set. It reads the
// canonical tree, so it runs whatever else is wrong and reports every problem at once; a
// value of the wrong JSON type is skipped here because the schema reports it.
type checker struct {
	probs    *problems
	minRetry time.Duration
}

// MaxStartYear is the last year a startTime may name: in any time zone its instant then falls
// before the year 10000, the last one RFC 3339 can write (docs/recurrence.md).
const MaxStartYear = 9998

func (c checker) job(props map[string]any) {
	if d, ok := c.dateTime(props, "", "startTime"); ok && d.Year > MaxStartYear {
		c.probs.add("startTime", fmt.Sprintf("must be in the year %d or earlier", MaxStartYear))
	}
	if s, ok := props["state"].(string); ok {
		if st, err := job.ParseState(s); err == nil && !st.ClientSettable() {
			c.probs.add("state", fmt.Sprintf("cannot be set to %s: a client may set only Enabled or Disabled; Completed and Faulted are set by the scheduler", st))
		}
	}
	if rec, ok := props["recurrence"].(map[string]any); ok {
		c.dateTime(rec, "recurrence", "endTime")
		if tz, ok := rec["timeZone"].(string); ok {
			if _, err := timezone.Load(tz); err != nil {
				c.probs.add("recurrence.timeZone", fmt.Sprintf("%v; use an IANA name such as Europe/Paris or a Windows name such as Pacific Standard Time", err))
			}
		}
	}
	if a, ok := props["action"].(map[string]any); ok {
		c.action(a, "action")
		if e, ok := a["errorAction"].(map[string]any); ok {
			c.action(e, "action.errorAction")
		}
	}
}

func (c checker) action(a map[string]any, at jsonPath) {
	if req, ok := a["request"].(map[string]any); ok {
		c.request(req, at.key("request"))
	}
	if rp, ok := a["retryPolicy"].(map[string]any); ok {
		c.retryInterval(rp, at.key("retryPolicy"))
	}
	for _, payload := range []string{"serviceBusQueueMessage", "serviceBusTopicMessage"} {
		msg, _ := a[payload].(map[string]any)
		if props, ok := msg["brokeredMessageProperties"].(map[string]any); ok {
			bp := at.key(payload).key("brokeredMessageProperties")
			c.dateTime(props, bp, "scheduledEnqueueTimeUtc")
			if s, ok := props["timeToLive"].(string); ok {
				if _, err := job.ParseDuration(s); err != nil {
					c.probs.add(string(bp.key("timeToLive")), err.Error())
				}
			}
		}
	}
}

func (c checker) request(req map[string]any, at jsonPath) {
	if s, ok := req["uri"].(string); ok {
		if u, err := url.Parse(s); err != nil || u.Host == "" || u.Opaque != "" {
			c.probs.add(string(at.key("uri")), "must be an absolute http or https URL with a host, such as http://localhost:8080/hook")
		} else if u.User != nil {
			// A URL is no secret: it is answered, shown and sent as it is. Credentials in it
			// would be too, where authentication's are sealed and never answered.
			c.probs.add(string(at.key("uri")), `must not hold a user name or password (they would be stored, answered and shown in clear); give them as "authentication": {"type": "Basic", "username": …, "password": …}, which is sealed and never answered`)
		} else {
			for name, values := range u.Query() {
				if job.IsSecretMember("query", name) && slices.Contains(values, "") {
					c.probs.add(string(at.key("uri")), fmt.Sprintf("the query's %s is empty: its value is a secret, answered empty, so give it again (or leave the parameter out)", name))
				}
			}
		}
	}
	if h, ok := req["headers"].(map[string]any); ok {
		n := 0
		for k, v := range h {
			s, isText := v.(string)
			n += utf8.RuneCountInString(k) + utf8.RuneCountInString(s)
			if isText && s == "" && job.IsSecretMember("headers", k) {
				// A client that puts back what it read would otherwise store the key as "".
				c.probs.add(string(at.key("headers").key(k)), "must not be empty: the value of a secret header is answered empty, so give it again (or leave the header out)")
			}
		}
		if n > MaxHeaderChars {
			c.probs.add(string(at.key("headers")), fmt.Sprintf("the headers add up to %d characters; at most 4,096 are allowed", n))
		}
	}
}

func (c checker) retryInterval(rp map[string]any, at jsonPath) {
	s, ok := rp["retryInterval"].(string)
	if !ok {
		return
	}
	at = at.key("retryInterval")
	d, err := job.ParseDuration(s)
	switch {
	case err != nil:
		c.probs.add(string(at), err.Error())
	case d.Std() < c.minRetry:
		c.probs.add(string(at), fmt.Sprintf("must be at least %s (%s)", job.DurationOf(c.minRetry), plainDuration(c.minRetry)))
	case d.Std() > MaxRetryInterval:
		c.probs.add(string(at), "must be at most 548.00:00:00 (548 days, about 18 months)")
	}
}

// dateTime checks a time text; it returns the time when there is one and it parses.
func (c checker) dateTime(obj map[string]any, at jsonPath, name string) (job.DateTime, bool) {
	s, ok := obj[name].(string)
	if !ok {
		return job.DateTime{}, false
	}
	d, err := job.ParseDateTime(s)
	if err != nil {
		c.probs.add(string(at.key(name)), err.Error())
		return job.DateTime{}, false
	}
	return d, true
}

func (c checker) collection(res map[string]any) {
	props, _ := res["properties"].(map[string]any)
	if s, ok := props["state"].(string); ok && s == string(job.CollectionDeleted) {
		c.probs.add("properties.state", "cannot be set to Deleted: delete the collection instead")
	}
}

// plainDuration writes a duration in words: "15 seconds", "2 minutes", "1h30m0s".
func plainDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0 && d >= time.Hour:
		return plural(int(d/time.Hour), "hour")
	case d%time.Minute == 0 && d >= time.Minute:
		return plural(int(d/time.Minute), "minute")
	case d%time.Second == 0:
		return plural(int(d/time.Second), "second")
	}
	return d.String()
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

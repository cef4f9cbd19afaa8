package sdktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/services/scheduler/mgmt/2016-03-01/scheduler"
	"github.com/Azure/go-autorest/autorest"
	"github.com/Azure/go-autorest/autorest/date"
	"github.com/Azure/go-autorest/autorest/to"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// Secrets the jobs carry: no answer of the gateway may hold one.
var secrets = []string{"basic-secret-1", "pfx-password-1", "oauth-secret-1", "sas-secret-1", "queue-sas-1"}

func (s *stack) clients(sub, token string) (scheduler.JobCollectionsClient, scheduler.JobsClient) {
	auth := autorest.NewAPIKeyAuthorizerWithHeaders(map[string]any{"Authorization": "Bearer " + token})
	cc := scheduler.NewJobCollectionsClientWithBaseURI(s.base, sub)
	jc := scheduler.NewJobsClientWithBaseURI(s.base, sub)
	cc.Authorizer, jc.Authorizer = auth, auth
	cc.Sender, jc.Sender = s.client, s.client
	cc.RetryAttempts, jc.RetryAttempts = 1, 1
	return cc, jc
}

// statusOf is the HTTP status of an SDK error.
func statusOf(err error) int {
	var de autorest.DetailedError
	if errors.As(err, &de) {
		if code, ok := de.StatusCode.(int); ok {
			return code
		}
	}
	return 0
}

func TestAzureSDKDrivesEveryOperation(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	cc, jc := s.clients("sub-1", "operator-token")
	armID := func(rg, c string) string {
		return "/subscriptions/sub-1/resourceGroups/" + rg + "/providers/Microsoft.Scheduler/jobCollections/" + c
	}

	// A collection on each plan, with the plan's quota.
	quotas := map[scheduler.SkuDefinition]int32{scheduler.Free: 5, scheduler.Standard: 50, scheduler.P10Premium: 50, scheduler.P20Premium: 1000}
	for sku, maxJobs := range quotas {
		name := "c-" + strings.ToLower(string(sku))
		got, err := cc.CreateOrUpdate(ctx, "rg-a", name, scheduler.JobCollectionDefinition{Location: to.StringPtr("West US"),
			Properties: &scheduler.JobCollectionProperties{Sku: &scheduler.Sku{Name: sku}}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if to.String(got.ID) != armID("rg-a", name) || to.String(got.Name) != name || got.Properties.Sku.Name != sku {
			t.Errorf("created %s: id %s name %s sku %v", name, to.String(got.ID), to.String(got.Name), got.Properties.Sku)
		}
		if q := got.Properties.Quota; q == nil || to.Int32(q.MaxJobCount) != maxJobs {
			t.Errorf("%s: quota %+v, want %d jobs", name, q, maxJobs)
		}
	}
	// Free: one per subscription, with the service's words.
	_, err := cc.CreateOrUpdate(ctx, "rg-b", "free-2", scheduler.JobCollectionDefinition{Location: to.StringPtr("West US"),
		Properties: &scheduler.JobCollectionProperties{Sku: &scheduler.Sku{Name: scheduler.Free}}})
	if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "Only one free job collection") {
		t.Errorf("a second Free collection: %v", err)
	}
	// The same name in another resource group is another collection.
	if _, err := cc.CreateOrUpdate(ctx, "rg-b", "c-standard", scheduler.JobCollectionDefinition{Location: to.StringPtr("North Europe"),
		Properties: &scheduler.JobCollectionProperties{Sku: &scheduler.Sku{Name: scheduler.Standard}}}); err != nil {
		t.Fatal(err)
	}
	countCollections := func(list func() (scheduler.JobCollectionListResultIterator, error)) []string {
		it, err := list()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for ; it.NotDone(); err = it.NextWithContext(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, to.String(it.Value().ID))
		}
		return ids
	}
	if ids := countCollections(func() (scheduler.JobCollectionListResultIterator, error) { return cc.ListBySubscriptionComplete(ctx) }); len(ids) != 5 {
		t.Errorf("the subscription lists %v, want 5 collections", ids)
	}
	if ids := countCollections(func() (scheduler.JobCollectionListResultIterator, error) {
		return cc.ListByResourceGroupComplete(ctx, "rg-b")
	}); len(ids) != 1 || ids[0] != armID("rg-b", "c-standard") {
		t.Errorf("rg-b lists %v", ids)
	}

	// Get, patch.
	got, err := cc.Get(ctx, "rg-a", "c-standard")
	if err != nil || to.String(got.Location) != "West US" {
		t.Fatalf("get: %v %+v", err, got)
	}
	patched, err := cc.Patch(ctx, "rg-a", "c-standard", scheduler.JobCollectionDefinition{Tags: map[string]*string{"team": to.StringPtr("billing")}})
	if err != nil || to.String(patched.Tags["team"]) != "billing" || len(patched.Tags) != 1 {
		t.Fatalf("patch: %v %+v", err, patched.Tags)
	}

	// One job of every action type and authentication, in the Premium collection.
	start := date.Time{Time: time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)}
	hourly := &scheduler.JobRecurrence{Frequency: scheduler.Hour}
	httpAction := func(path string, auth scheduler.BasicHTTPAuthentication) *scheduler.JobAction {
		typ := scheduler.HTTP
		if auth != nil {
			typ = scheduler.HTTPS
		}
		return &scheduler.JobAction{Type: typ, Request: &scheduler.HTTPRequest{URI: to.StringPtr(s.target.url + path), Method: to.StringPtr("POST"),
			Body: to.StringPtr("hello"), Authentication: auth}, RetryPolicy: &scheduler.RetryPolicy{RetryType: scheduler.None}}
	}
	pfx := tlstest.PFX(t, "pfx-password-1")
	jobs := map[string]*scheduler.JobAction{
		"http-ok":     httpAction("/ok", nil),
		"http-fail":   httpAction("/fail", nil),
		"https-basic": httpAction("/basic", scheduler.BasicAuthentication{Username: to.StringPtr("u"), Password: to.StringPtr("basic-secret-1")}),
		"https-cert":  httpAction("/cert", scheduler.ClientCertAuthentication{Pfx: to.StringPtr(pfx), Password: to.StringPtr("pfx-password-1")}),
		"https-oauth": httpAction("/oauth", scheduler.OAuthAuthentication{Tenant: to.StringPtr("contoso.com"), Audience: to.StringPtr("https://management.core.windows.net/"),
			ClientID: to.StringPtr("client-1"), Secret: to.StringPtr("oauth-secret-1")}),
		"queue": {Type: scheduler.StorageQueue, QueueMessage: &scheduler.StorageQueueMessage{StorageAccount: to.StringPtr("acct"),
			QueueName: to.StringPtr("orders-queue"), SasToken: to.StringPtr("?sv=2019&sig=queue-sas-1"), Message: to.StringPtr("m")}},
		"sb-queue": {Type: scheduler.ServiceBusQueue, ServiceBusQueueMessage: &scheduler.ServiceBusQueueMessage{QueueName: to.StringPtr("q"),
			Namespace: to.StringPtr("ns"), Message: to.StringPtr("m"), TransportType: scheduler.ServiceBusTransportTypeAMQP,
			Authentication: &scheduler.ServiceBusAuthentication{Type: scheduler.SharedAccessKey, SasKeyName: to.StringPtr("k"), SasKey: to.StringPtr("sas-secret-1")}}},
		"sb-topic": {Type: scheduler.ServiceBusTopic, ServiceBusTopicMessage: &scheduler.ServiceBusTopicMessage{TopicPath: to.StringPtr("t"),
			Namespace: to.StringPtr("ns"), Message: to.StringPtr("m"), TransportType: scheduler.ServiceBusTransportTypeAMQP,
			Authentication: &scheduler.ServiceBusAuthentication{Type: scheduler.SharedAccessKey, SasKeyName: to.StringPtr("k"), SasKey: to.StringPtr("sas-secret-1")}}},
	}
	for name, action := range jobs {
		got, err := jc.CreateOrUpdate(ctx, "rg-a", "c-p20premium", name, scheduler.JobDefinition{Properties: &scheduler.JobProperties{
			StartTime: &start, Action: action, Recurrence: hourly}})
		if err != nil {
			t.Fatalf("create job %s: %v", name, err)
		}
		wantID := armID("rg-a", "c-p20premium") + "/jobs/" + name
		if to.String(got.ID) != wantID || to.String(got.Name) != "c-p20premium/"+name {
			t.Errorf("job %s: id %s, name %s", name, to.String(got.ID), to.String(got.Name))
		}
		if r := got.Properties.Recurrence; r == nil || to.Int32(r.Interval) != 1 {
			t.Errorf("job %s: interval not echoed as 1: %+v", name, r)
		}
	}
	cert, err := jc.Get(ctx, "rg-a", "c-p20premium", "https-cert")
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := cert.Properties.Action.Request.Authentication.AsClientCertAuthentication(); !ok ||
		to.String(a.CertificateThumbprint) == "" || to.String(a.CertificateSubjectName) != "CN=resched test" || a.CertificateExpirationDate == nil {
		t.Errorf("the ClientCertificate job's details: %+v", cert.Properties.Action.Request.Authentication)
	}
	// A job's JSON read and put back as read (curl and jq, PowerShell's Invoke-RestMethod)
	// carries a monthly occurrence's count under both spellings the gateway answers: it is
	// accepted, and the job keeps its count (the last Friday, not every Friday).
	lastFriday := *jobs["http-ok"]
	monthly := scheduler.JobDefinition{Properties: &scheduler.JobProperties{StartTime: &start, Action: &lastFriday,
		Recurrence: &scheduler.JobRecurrence{Frequency: scheduler.Month, Schedule: &scheduler.JobRecurrenceSchedule{
			MonthlyOccurrences: &[]scheduler.JobRecurrenceScheduleMonthlyOccurrence{{Day: scheduler.JobScheduleDayFriday, Occurrence: to.Int32Ptr(-1)}}}}}}
	if _, err := jc.CreateOrUpdate(ctx, "rg-a", "c-standard", "last-friday", monthly); err != nil {
		t.Fatal(err)
	}
	jobURL := s.base + armID("rg-a", "c-standard") + "/jobs/last-friday?api-version=2016-03-01"
	raw := func(method string, body []byte) []byte {
		req, _ := http.NewRequest(method, jobURL, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer operator-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s last-friday: %d %s", method, resp.StatusCode, b)
		}
		return b
	}
	read := raw("GET", nil)
	if !strings.Contains(string(read), `"occurrence":-1`) || !strings.Contains(string(read), `"Occurrence":-1`) {
		t.Errorf("the last Friday answered as %s", read)
	}
	if back := raw("PUT", read); !bytes.Equal(back, read) {
		t.Errorf("put back as read, the job became\n%s\nfrom\n%s", back, read)
	}
	// A retry interval comes back in the form it was sent: TimeSpan text (what the service
	// answered, and what a client comparing its own value expects) or ISO 8601 (the swagger's,
	// the only one generated clients read; TestPythonSDKDrivesTheGateway).
	for name, interval := range map[string]string{"retry-timespan": "00:01:00", "retry-iso": "PT1M"} {
		a := *jobs["http-ok"]
		a.RetryPolicy = &scheduler.RetryPolicy{RetryType: scheduler.Fixed, RetryInterval: to.StringPtr(interval), RetryCount: to.Int32Ptr(1)}
		created, err := jc.CreateOrUpdate(ctx, "rg-a", "c-standard", name, scheduler.JobDefinition{Properties: &scheduler.JobProperties{
			StartTime: &start, Action: &a, Recurrence: hourly}})
		if err != nil {
			t.Fatalf("create job %s: %v", name, err)
		}
		got, err := jc.Get(ctx, "rg-a", "c-standard", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range []scheduler.JobDefinition{created, got} {
			if p := j.Properties.Action.RetryPolicy; p == nil || to.String(p.RetryInterval) != interval {
				t.Errorf("job %s: the retry policy came back as %+v, want the interval %s", name, p, interval)
			}
		}
	}

	// Listing through nextLink, two at a time, and by state.
	page, err := jc.List(ctx, "rg-a", "c-p20premium", to.Int32Ptr(2), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	pages := 0
	for ; page.NotDone(); err = page.NextWithContext(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, j := range page.Values() {
			names = append(names, to.String(j.Name))
		}
	}
	if len(names) != len(jobs) || pages != (len(jobs)+1)/2 {
		t.Errorf("listed %d jobs over %d pages: %v", len(names), pages, names)
	}
	if _, err := jc.Patch(ctx, "rg-a", "c-p20premium", "queue", scheduler.JobDefinition{Properties: &scheduler.JobProperties{State: scheduler.JobStateDisabled}}); err != nil {
		t.Fatal(err)
	}
	disabled, err := jc.ListComplete(ctx, "rg-a", "c-p20premium", nil, nil, "state eq 'Disabled'")
	if err != nil || !disabled.NotDone() || to.String(disabled.Value().Name) != "c-p20premium/queue" {
		t.Errorf("state filter: %v", err)
	}
	// As the service answered it, a disabled job has no status (the planners' API keeps it).
	if q, err := jc.Get(ctx, "rg-a", "c-p20premium", "queue"); err != nil || q.Properties.Status != nil {
		t.Errorf("a disabled job: %v, status %+v", err, q.Properties.Status)
	}

	// Runs, and their history with a status filter.
	for _, name := range []string{"http-ok", "http-fail"} {
		if _, err := jc.Run(ctx, "rg-a", "c-p20premium", name); err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "both runs delivered", func() bool { return s.target.count("/ok") == 1 && s.target.count("/fail") >= 1 })
	history := func(job, filter string) []scheduler.JobHistoryDefinition {
		it, err := jc.ListJobHistoryComplete(ctx, "rg-a", "c-p20premium", job, nil, nil, filter)
		if err != nil {
			t.Fatal(err)
		}
		var out []scheduler.JobHistoryDefinition
		for ; it.NotDone(); err = it.NextWithContext(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, it.Value())
		}
		return out
	}
	testenv.Eventually(t, 30*time.Second, "the failure recorded", func() bool { return len(history("http-fail", "status eq 'Failed'")) == 1 })
	if h := history("http-fail", "status eq 'Completed'"); len(h) != 0 {
		t.Errorf("http-fail has %d Completed entries", len(h))
	}
	testenv.Eventually(t, 30*time.Second, "the success recorded", func() bool { return len(history("http-ok", "")) == 1 })
	h := history("http-ok", "status eq 'Completed'")
	if len(h) != 1 || h[0].Properties == nil || h[0].Properties.Status != scheduler.Completed ||
		!strings.HasPrefix(to.String(h[0].ID), armID("rg-a", "c-p20premium")+"/jobs/http-ok/history/") {
		t.Errorf("history of http-ok: %+v", h)
	}

	// Disable and enable answer 200 with no body.
	for _, op := range []func(context.Context, string, string) (*http.Response, error){
		func(ctx context.Context, rg, c string) (*http.Response, error) {
			f, err := cc.Disable(ctx, rg, c)
			return f.Response(), err
		},
		func(ctx context.Context, rg, c string) (*http.Response, error) {
			f, err := cc.Enable(ctx, rg, c)
			return f.Response(), err
		},
	} {
		if resp, err := op(ctx, "rg-a", "c-standard"); err != nil || resp == nil || resp.StatusCode != http.StatusOK {
			t.Errorf("disable/enable: %v", err)
		}
	}

	// The plans' refusals.
	free := func(name string, action *scheduler.JobAction, rec *scheduler.JobRecurrence) error {
		_, err := jc.CreateOrUpdate(ctx, "rg-a", "c-free", name, scheduler.JobDefinition{Properties: &scheduler.JobProperties{
			StartTime: &start, Action: action, Recurrence: rec}})
		return err
	}
	if err := free("auth", jobs["https-basic"], hourly); statusOf(err) != http.StatusConflict {
		t.Errorf("outbound authentication in a Free collection: %v", err)
	}
	if err := free("minutely", jobs["http-ok"], &scheduler.JobRecurrence{Frequency: scheduler.Minute}); statusOf(err) != http.StatusConflict {
		t.Errorf("a minutely job in a Free collection: %v", err)
	}
	retry := *jobs["http-ok"]
	retry.RetryPolicy = &scheduler.RetryPolicy{RetryType: scheduler.Fixed, RetryInterval: to.StringPtr("PT30S"), RetryCount: to.Int32Ptr(2)}
	if err := free("retry", &retry, hourly); statusOf(err) != http.StatusBadRequest {
		t.Errorf("a 30 s retry in a Free collection: %v", err)
	}
	for i := range 5 {
		if err := free(fmt.Sprint("j", i), jobs["http-ok"], hourly); err != nil {
			t.Fatal(err)
		}
	}
	if err := free("j5", jobs["http-ok"], hourly); statusOf(err) != http.StatusConflict {
		t.Errorf("a sixth job in a Free collection: %v", err)
	}
	if _, err := cc.Patch(ctx, "rg-a", "c-free", scheduler.JobCollectionDefinition{Properties: &scheduler.JobCollectionProperties{
		Sku: &scheduler.Sku{Name: scheduler.Free}, Quota: &scheduler.JobCollectionQuota{MaxJobCount: to.Int32Ptr(6)}}}); statusOf(err) != http.StatusBadRequest ||
		!strings.Contains(err.Error(), "cannot be set higher than '5'") {
		t.Errorf("a Free quota of 6 jobs: %v", err)
	}

	// Delete a job, then the collections.
	if _, err := jc.Delete(ctx, "rg-a", "c-p20premium", "sb-topic"); err != nil {
		t.Fatal(err)
	}
	if _, err := jc.Get(ctx, "rg-a", "c-p20premium", "sb-topic"); statusOf(err) != http.StatusNotFound {
		t.Errorf("a deleted job: %v", err)
	}
	for _, c := range []struct{ rg, name string }{{"rg-a", "c-free"}, {"rg-a", "c-standard"}, {"rg-a", "c-p10premium"}, {"rg-a", "c-p20premium"}, {"rg-b", "c-standard"}} {
		f, err := cc.Delete(ctx, c.rg, c.name)
		if err != nil || f.Response().StatusCode != http.StatusOK {
			t.Errorf("delete %s/%s: %v", c.rg, c.name, err)
		}
	}
	if _, err := cc.Get(ctx, "rg-b", "c-standard"); statusOf(err) != http.StatusNotFound {
		t.Errorf("a deleted collection: %v", err)
	}

	for _, secret := range secrets {
		if strings.Contains(s.answers(), secret) {
			t.Errorf("an answer holds the secret %q", secret)
		}
	}
	s.checker.mu.Lock()
	defer s.checker.mu.Unlock()
	for _, op := range []string{"JobCollections_ListBySubscription", "JobCollections_ListByResourceGroup", "JobCollections_Get",
		"JobCollections_CreateOrUpdate", "JobCollections_Patch", "JobCollections_Delete", "JobCollections_Enable", "JobCollections_Disable",
		"Jobs_Get", "Jobs_CreateOrUpdate", "Jobs_Patch", "Jobs_Delete", "Jobs_Run", "Jobs_List", "Jobs_ListJobHistory"} {
		if s.checker.seen[op] == 0 {
			t.Errorf("no answer of %s was checked against the swagger", op)
		}
	}
}

package security

import (
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

// A secret given as a number (or of another wrong type) is refused, and the refusal names the
// field without writing the value back: not in the answer, not in the rejected event other
// subscribers see, not in the planner's log.
func TestASecretOfTheWrongTypeIsNotWrittenBack(t *testing.T) {
	srv, sc := runOpen(t)
	events := &recorder{}
	nc := srv.Connect(t)
	if _, err := nc.Subscribe("scheduler.events.>", events.add); err != nil {
		t.Fatal(err)
	}
	sc.ctl(t, "collection", "create", "c")
	secrets := []string{"987654321", "31415926", "27182818"}

	// Through the API.
	file := writeFile(t, t.TempDir(), "job.json", []byte(`{"properties": {"action": {"type": "Http", "request": {
		"method": "POST", "uri": "http://127.0.0.1:1/", "headers": {"Authorization": 27182818},
		"authentication": {"type": "Basic", "username": "svc", "password": 987654321}}},
		"recurrence": {"frequency": "Hour"}}}`))
	out, errOut, code := schedctl(t, []string{"NATS_URL=" + srv.ClientURL()}, "job", "put", "c/api", "-f", file)
	if code != 2 || !strings.Contains(out+errOut, "action.request.authentication.password") ||
		!strings.Contains(out+errOut, "headers") {
		t.Fatalf("job put: exit %d, want 2 naming both fields:\n%s%s", code, out, errOut)
	}
	// Through the intake stream.
	if err := nc.Publish("scheduler.jobs.c.intake", []byte(`{"properties": {"action": {"type": "ServiceBusQueue",
		"serviceBusQueueMessage": {"namespace": "ns", "queueName": "q", "message": "m", "transportType": "AMQP",
		"authentication": {"type": "SharedAccessKey", "sasKeyName": "k", "sasKey": 31415926}}},
		"recurrence": {"frequency": "Hour"}}}`)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "both rejections published", func() bool {
		all := strings.Join(events.all(), "\n")
		return strings.Contains(all, "serviceBusQueueMessage.authentication.sasKey") && strings.Contains(all, "authentication.password")
	})
	for where, text := range map[string]string{"the answer": out + errOut, "the events": strings.Join(events.all(), "\n"),
		"the planner's log": testenv.TailOf(sc.planner.Log, 4<<20)} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the secret %s:\n%s", where, s, text)
			}
		}
	}
}

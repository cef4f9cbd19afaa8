package recurrence_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestSeedScheduleTable runs every row of the schedule example table of the Azure Scheduler
// documentation ("Build complex schedules and advanced recurrence with Azure Scheduler",
// section "Examples: Recurrence Schedules"; the rows are the cases below) with one fixed start:
// Monday 2024-01-01 12:25:00Z, accepted the day before. Rows that leave hours or minutes out take them from the start (12:25).
func TestSeedScheduleTable(t *testing.T) {
	const (
		now      = "2023-12-31T00:00:00Z"
		start    = "2024-01-01T12:25:00Z"
		mwf      = `"weekDays":["monday","wednesday","friday"]`
		weekdays = `"weekDays":["monday","tuesday","wednesday","thursday","friday"]`
	)
	rows := []struct{ freq, schedule, want string }{
		{"Day", `{"hours":[5]}`, "01-02 05:25, 01-03 05:25, 01-04 05:25, 01-05 05:25"},
		{"Day", `{"minutes":[15], "hours":[5]}`, "01-02 05:15, 01-03 05:15, 01-04 05:15, 01-05 05:15"},
		{"Day", `{"minutes":[15], "hours":[5,17]}`, "01-01 17:15, 01-02 05:15, 01-02 17:15, 01-03 05:15"},
		{"Day", `{"minutes":[15,45], "hours":[5,17]}`, "01-01 17:15, 01-01 17:45, 01-02 05:15, 01-02 05:45"},
		{"Day", `{"minutes":[0,15,30,45]}`, "01-01 12:30, 01-01 12:45, 01-01 13:00, 01-01 13:15"},
		{"Day", `{"hours":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23]}`, "01-01 12:25, 01-01 13:25, 01-01 14:25, 01-01 15:25"},
		{"Day", `{"minutes":[0]}`, "01-01 13:00, 01-01 14:00, 01-01 15:00, 01-01 16:00"},
		{"Day", `{"minutes":[15]}`, "01-01 13:15, 01-01 14:15, 01-01 15:15, 01-01 16:15"},
		{"Week", `{"hours":[17], "weekDays":["saturday"]}`, "01-06 17:25, 01-13 17:25, 01-20 17:25, 01-27 17:25"},
		{"Week", `{"hours":[17], ` + mwf + `}`, "01-01 17:25, 01-03 17:25, 01-05 17:25, 01-08 17:25"},
		{"Week", `{"minutes":[15,45], "hours":[17], ` + mwf + `}`, "01-01 17:15, 01-01 17:45, 01-03 17:15, 01-03 17:45"},
		{"Week", `{"hours":[5,17], ` + mwf + `}`, "01-01 17:25, 01-03 05:25, 01-03 17:25, 01-05 05:25"},
		{"Week", `{"minutes":[15,45], "hours":[5,17], ` + mwf + `}`, "01-01 17:15, 01-01 17:45, 01-03 05:15, 01-03 05:45"},
		{"Week", `{"minutes":[0,15,30,45], ` + weekdays + `}`, "01-01 12:30, 01-01 12:45, 01-01 13:00, 01-01 13:15"},
		{"Week", `{"minutes":[0,15,30,45], "hours":[9,10,11,12,13,14,15,16], ` + weekdays + `}`, "01-01 12:30, 01-01 12:45, 01-01 13:00, 01-01 13:15"},
		{"Week", `{"weekDays":["sunday"]}`, "01-07 12:25, 01-14 12:25, 01-21 12:25, 01-28 12:25"},
		{"Week", `{"weekDays":["tuesday","thursday"]}`, "01-02 12:25, 01-04 12:25, 01-09 12:25, 01-11 12:25"},
		{"Month", `{"minutes":[0], "hours":[6], "monthDays":[28]}`, "01-28 06:00, 02-28 06:00, 03-28 06:00, 04-28 06:00"},
		{"Month", `{"minutes":[0], "hours":[6], "monthDays":[-1]}`, "01-31 06:00, 02-29 06:00, 03-31 06:00, 04-30 06:00"},
		{"Month", `{"minutes":[0], "hours":[6], "monthDays":[1,-1]}`, "01-31 06:00, 02-01 06:00, 02-29 06:00, 03-01 06:00"},
		{"Month", `{"monthDays":[1,-1]}`, "01-01 12:25, 01-31 12:25, 02-01 12:25, 02-29 12:25"},
		{"Month", `{"monthDays":[1,14]}`, "01-01 12:25, 01-14 12:25, 02-01 12:25, 02-14 12:25"},
		{"Month", `{"monthDays":[2]}`, "01-02 12:25, 02-02 12:25, 03-02 12:25, 04-02 12:25"},
		{"Month", `{"minutes":[0], "hours":[5], "monthlyOccurrences":[{"day":"friday", "occurrence":1}]}`, "01-05 05:00, 02-02 05:00, 03-01 05:00, 04-05 05:00"},
		{"Month", `{"monthlyOccurrences":[{"day":"friday", "occurrence":1}]}`, "01-05 12:25, 02-02 12:25, 03-01 12:25, 04-05 12:25"},
		{"Month", `{"monthlyOccurrences":[{"day":"friday", "occurrence":-3}]}`, "01-12 12:25, 02-09 12:25, 03-15 12:25, 04-12 12:25"},
		{"Month", `{"minutes":[15], "hours":[5], "monthlyOccurrences":[{"day":"friday", "occurrence":1},{"day":"friday", "occurrence":-1}]}`, "01-05 05:15, 01-26 05:15, 02-02 05:15, 02-23 05:15"},
		{"Month", `{"monthlyOccurrences":[{"day":"friday", "occurrence":1},{"day":"friday", "occurrence":-1}]}`, "01-05 12:25, 01-26 12:25, 02-02 12:25, 02-23 12:25"},
		{"Month", `{"monthlyOccurrences":[{"day":"friday", "occurrence":5}]}`, "03-29 12:25, 05-31 12:25, 08-30 12:25, 11-29 12:25"},
		{"Month", `{"minutes":[0,15,30,45], "monthlyOccurrences":[{"day":"friday", "occurrence":-1}]}`, "01-26 00:00, 01-26 00:15, 01-26 00:30, 01-26 00:45"},
		{"Month", `{"minutes":[15,45], "hours":[5,17], "monthlyOccurrences":[{"day":"wednesday", "occurrence":3}]}`, "01-17 05:15, 01-17 05:45, 01-17 17:15, 01-17 17:45"},
	}
	for i, r := range rows {
		t.Run(fmt.Sprintf("%02d %s %s", i+1, r.freq, r.schedule), func(t *testing.T) {
			rec := fmt.Sprintf(`{"frequency":%q,"interval":1,"schedule":%s}`, r.freq, r.schedule)
			got := compile(t, now, start, rec).Preview(4)
			want := expand("2024-", r.want)
			if fmt.Sprint(formatAll(got)) != fmt.Sprint(want) {
				t.Errorf("%s\n got %v\nwant %v", rec, formatAll(got), want)
			}
		})
	}
}

// expand turns "01-02 05:25, 01-03 05:25" into RFC 3339 UTC times of the given year prefix.
func expand(yearPrefix, list string) []string {
	var out []string
	for _, item := range strings.Split(list, ",") {
		md, hm, _ := strings.Cut(strings.TrimSpace(item), " ")
		out = append(out, yearPrefix+md+"T"+hm+":00Z")
	}
	return out
}

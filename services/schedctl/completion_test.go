package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := schedctl(t, "", args...)
		if code != 0 || !strings.HasPrefix(out, "schedctl ") || !strings.Contains(out, " go1.") {
			t.Errorf("schedctl %v: exit %d, %q", args, code, out)
		}
	}
}

// The completion scripts are run by the real shells (scripts/deps.sh shells installs zsh and
// fish): each completes a subcommand and a flag of it.
func TestCompletion(t *testing.T) {
	scripts := map[string]string{}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := schedctl(t, "", "completion", shell)
		if code != 0 || out == "" {
			t.Fatalf("completion %s: exit %d, %s", shell, code, errOut)
		}
		scripts[shell] = filepath.Join(t.TempDir(), "schedctl."+shell)
		if err := os.WriteFile(scripts[shell], []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := schedctl(t, "", "completion", "tcsh"); code != 2 || !strings.Contains(errOut, "bash, zsh and fish") {
		t.Errorf("completion tcsh: exit %d, %q", code, errOut)
	}
	bash := `source "$1"; complete() { :; }
COMP_WORDS=(schedctl job cr); COMP_CWORD=2; _schedctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(schedctl job create --ev); COMP_CWORD=3; _schedctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(schedctl collection delete --y); COMP_CWORD=3; _schedctl; echo "${COMPREPLY[*]}"
COMP_WORDS=(schedctl cluster st); COMP_CWORD=2; _schedctl; echo "${COMPREPLY[*]}"`
	for shell, program := range map[string][]string{
		"bash": {"bash", "-c", bash, "bash", scripts["bash"]},
		// zsh runs the same function through bashcompinit: load it and call it.
		"zsh":  {"zsh", "-c", `autoload -U compinit && compinit -u; ` + strings.Replace(bash, `source "$1"; complete() { :; }`, `source "$1"`, 1), "zsh", scripts["zsh"]},
		"fish": {"fish", "-c", `source $argv[1]; complete -C "schedctl job cr"; complete -C "schedctl job create --ev"; complete -C "schedctl collection delete --y"; complete -C "schedctl cluster st"`, scripts["fish"]},
	} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(program[0]); err != nil {
				t.Fatalf("%s is not installed (scripts/deps.sh shells installs it): %v", shell, err)
			}
			out, err := exec.Command(program[0], program[1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", shell, err, out)
			}
			for _, want := range []string{"create", "--every", "--yes", "status"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s completed to %q, without %s", shell, out, want)
				}
			}
		})
	}
}

// At a Tab after a subcommand that takes a name, the real shells ask the planners, through the
// built schedctl on PATH and NATS_URL as a user has them: a collection comes with its / to go
// on with the job, a job's name is completed from its start, a collection command gets the
// collections. With no planner to answer, nothing is completed, at once.
func TestCompletionOfNames(t *testing.T) {
	p := startPlanner(t)
	p.mustRun(t, "", "collection", "create", "reports")
	p.mustRun(t, "", "collection", "create", "other")
	for _, j := range []string{"reports/daily", "reports/weekly", "reports/weekly-2", "other/x"} {
		p.mustRun(t, "", "job", "create", j, "--every", "1h", "--at", "2099-01-01T00:00:00Z", "--http-get", "http://x/")
	}
	bin := testenv.Build(t, "schedctl")
	// files: bash and zsh complete a file name there; fish, told to complete none, nothing.
	cases := []struct {
		line, want string
		files      bool
	}{
		{"schedctl job get rep", "reports/", false},
		{"schedctl job describe reports/w", "reports/weekly reports/weekly-2", false},
		{"schedctl job history reports/", "reports/daily reports/weekly reports/weekly-2", false},
		{"schedctl collection delete o", "other", false},
		{"schedctl job list r", "reports", false},
		{"schedctl job get nowhere/", "", false},
		// Flags before the name, one with a value: the name is still the first argument.
		{"schedctl job describe -n 3 -o json reports/w", "reports/weekly reports/weekly-2", false},
		// The connection flags on the line are the ones asked, not NATS_URL.
		{"schedctl job get --server nats://127.0.0.1:1 rep", "", false},
		{"schedctl job get --prefix=elsewhere rep", "", false},
		{"schedctl job get --server " + p.url + " --timeout 3s rep", "reports/", false},
		// Not a name: a second argument, a flag's value. The shell's file names instead.
		{"schedctl job get reports/daily rep", "reports.txt", true},
		{"schedctl job put reports/x -f rep", "reports.txt", true},
	}
	dir := t.TempDir() // the shells' working folder, with a file to complete
	if err := os.WriteFile(filepath.Join(dir, "reports.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Fatalf("%s is not installed (scripts/deps.sh shells installs it): %v", shell, err)
			}
			_, script, _ := schedctl(t, "", "completion", shell)
			file := filepath.Join(t.TempDir(), "schedctl."+shell)
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			var prog strings.Builder
			for _, c := range cases {
				switch shell {
				case "fish":
					prog.WriteString("echo (complete -C '" + c.line + "' | cut -f1)\n")
				default:
					// What bash sets (zsh's bashcompinit too): the words, the current one, the line.
					fmt.Fprintf(&prog, "COMP_WORDS=(%s); COMP_CWORD=%d; COMP_LINE='%s'; COMP_POINT=${#COMP_LINE}; _schedctl; echo \"${COMPREPLY[*]}\"\n",
						c.line, len(strings.Fields(c.line))-1, c.line)
				}
			}
			var cmd *exec.Cmd
			switch shell {
			case "bash":
				// Outside a real completion, bash's complete and compopt refuse to run.
				cmd = exec.Command("bash", "-c", `source "$1"; complete() { :; }; compopt() { :; }; `+prog.String(), "bash", file)
			case "zsh":
				cmd = exec.Command("zsh", "-c", `autoload -U compinit && compinit -u; source "$1"; `+prog.String(), "zsh", file)
			case "fish":
				cmd = exec.Command("fish", "-c", "source $argv[1]; "+prog.String(), file)
			}
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NATS_URL="+p.url)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", shell, err, out)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(got) != len(cases) {
				t.Fatalf("%s printed %d lines for %d cases:\n%s", shell, len(got), len(cases), out)
			}
			for i, c := range cases {
				want := c.want
				if shell == "fish" && c.files {
					want = ""
				}
				if strings.Join(strings.Fields(got[i]), " ") != want {
					t.Errorf("%s: %q completed to %q, want %q", shell, c.line, got[i], want)
				}
			}
		})
	}
	// zsh offers the answers itself, a collection without a space after it so that its job's
	// name can follow (bashcompinit's layer added one); compadd is stood in for, as only a
	// completion widget may call it.
	t.Run("zsh offers a collection without a space", func(t *testing.T) {
		_, script, _ := schedctl(t, "", "completion", "zsh")
		file := filepath.Join(t.TempDir(), "schedctl.zsh")
		if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		var prog strings.Builder
		for _, line := range []string{"schedctl job get rep", "schedctl job describe reports/w", "schedctl job get nowhere/"} {
			fmt.Fprintf(&prog, "words=(%s); CURRENT=${#words}; BUFFER='%s'; CURSOR=${#BUFFER}; _schedctl_zsh; echo \"status $?\"\n", line, line)
		}
		cmd := exec.Command("zsh", "-c", `autoload -U compinit && compinit -u; source "$1"; compadd() { print -r -- "compadd $*" }; `+prog.String(), "zsh", file)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NATS_URL="+p.url)
		out, err := cmd.CombinedOutput()
		want := "compadd -S  -- reports/\nstatus 0\n" +
			"compadd -- reports/weekly\ncompadd -- reports/weekly-2\nstatus 0\n" +
			"status 1\n"
		if err != nil || string(out) != want {
			t.Fatalf("zsh: %v\n%s\nwant\n%s", err, out, want)
		}
	})

	// A prefix with more jobs than a completion lists: pages read from the prefix on, 200 names.
	p.mustRun(t, "", "collection", "create", "many")
	var bulk strings.Builder
	bulk.WriteString(`{"jobs": [`)
	for i := range 250 {
		if i > 0 {
			bulk.WriteString(",")
		}
		fmt.Fprintf(&bulk, `{"name": "m-%03d", "properties": {"startTime": "2099-01-01T00:00:00Z", "action": {"type": "Http", "request": {"uri": "http://x/", "method": "GET"}}}}`, i)
	}
	bulk.WriteString(`, {"name": "a-first", "properties": {"action": {"type": "Http", "request": {"uri": "http://x/", "method": "GET"}}}}]}`)
	if _, err := p.nc.Request("scheduler.api.jobs.bulk.many", []byte(bulk.String()), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	_, out, _ := schedctl(t, "", "__complete", "job", "many/m-", "--server", p.url)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != completeMax || lines[0] != "many/m-000" || lines[completeMax-1] != "many/m-199" {
		t.Errorf("__complete job many/m-: %d names, %q … %q; want m-000 … m-199", len(lines), lines[0], lines[len(lines)-1])
	}
	// No planner: nothing, and no error for the shell to show.
	code, out, errOut := schedctl(t, "", "__complete", "job", "rep", "--server", "nats://127.0.0.1:1")
	if code != 0 || out != "" || errOut != "" {
		t.Errorf("__complete with no server: exit %d, %q, %q", code, out, errOut)
	}
}

// FuzzNameAt: any command line a shell passes to a completion is read without a panic; what
// it forwards begins with a flag, and a line shorter than a subcommand asks for no name.
func FuzzNameAt(f *testing.F) {
	for _, line := range []string{"schedctl job get --server nats://x:4222 ", "schedctl --server=x job describe -n 3 ",
		"schedctl job put c/j -f", "schedctl job get -- ", "schedctl collection delete 'a b' \"c", "schedctl", "schedctl job", "~/x --tlsca"} {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words := lineWords([]string{line})
		at, conn := nameAt(words)
		if len(conn) > 0 && !strings.HasPrefix(conn[0], "-") {
			t.Fatalf("%q forwards %q, which does not begin with a flag", line, conn)
		}
		if at && len(words) < 3 {
			t.Fatalf("%q: a name asked for after %d words", line, len(words))
		}
	})
}

// A collection is completed from its prefix on, however many collections sort before it: read
// from the first collection, 10 pages of 1,000 found none of those past them. A planner
// stand-in answers from a list of 20,000 names, by cursor.
func TestCompletionOfACollectionPastManyOthers(t *testing.T) {
	ns := natstest.Start(t)
	var names []string
	for i := range 20_000 {
		names = append(names, fmt.Sprintf("c%05d", i))
	}
	standIn(t, ns, "many.api.collections.list", func(m *nats.Msg) {
		var req listRequest
		_ = json.Unmarshal(m.Data, &req)
		from := sort.SearchStrings(names, req.After+"\x00")
		end := min(from+req.Top, len(names))
		reply := map[string]any{}
		var value []job.Collection
		for _, n := range names[from:end] {
			value = append(value, job.Collection{Name: n})
		}
		reply["value"] = value
		if end < len(names) {
			reply["nextLink"] = listRequest{Top: req.Top, After: names[end-1]}
		}
		body, _ := json.Marshal(reply)
		_ = m.Respond(body)
	})
	code, out, _ := schedctl(t, "", "__complete", "collection", "c1999", "--prefix", "many", "--server", ns.ClientURL())
	if want := "c19990\nc19991\nc19992\nc19993\nc19994\nc19995\nc19996\nc19997\nc19998\nc19999\n"; code != 0 || out != want {
		t.Fatalf("completing c1999: exit %d\n%s\nwant\n%s", code, out, want)
	}
}

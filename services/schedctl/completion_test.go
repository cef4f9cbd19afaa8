package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

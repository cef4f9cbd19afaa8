package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Setting is one configuration value: its flag, its environment variable and how to read it.
type Setting struct {
	What  string // how errors name it
	Flag  string
	Env   string
	Usage string
	Value Field
}

// Parse reads settings for the command name: their defaults (already in the fields), then the
// environment (through getenv, so tests need not touch the process's), then flags. A variable
// X may also be given as X_FILE, the path of a file holding its value (a mounted Secret), as
// container images commonly allow; X itself wins when both are set, and a flag over both. A
// Secret read from X_FILE also keeps the file's path (Secret). A usage
// problem (flag.ErrHelp for -h, an unknown flag, an argument) is returned as err, with the
// usage written to output; bad values come back in problems, every one naming its flag and
// its variable.
func Parse(name string, settings []Setting, args []string, getenv func(string) string, output io.Writer) (problems []error, err error) {
	raw := make([]string, len(settings))
	files := make([]string, len(settings)) // the X_FILE a value was read from
	envs := map[string]bool{}
	for _, s := range settings {
		envs[s.Env] = true
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(output)
	for i, s := range settings {
		// Registered with the built-in default, so -h never prints a value (and a password) that
		// came from the environment.
		if isBool(s.Value) {
			raw[i] = s.Value.String()
			fs.Var(boolFlag{&raw[i]}, s.Flag, s.Usage+" (env "+s.Env+")")
		} else {
			fs.StringVar(&raw[i], s.Flag, s.Value.String(), s.Usage+" (env "+s.Env+")")
		}
		if v := strings.TrimSpace(getenv(s.Env)); v != "" {
			raw[i] = v
		} else if path := strings.TrimSpace(getenv(s.Env + "_FILE")); path != "" && !envs[s.Env+"_FILE"] {
			b, err := os.ReadFile(path)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s (%s_FILE): %w", s.What, s.Env, err))
				continue
			}
			raw[i] = strings.TrimRight(string(b), "\r\n")
			files[i] = path
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: the %s takes flags only", fs.Arg(0), name)
	}
	given := map[string]bool{} // flags on the command line, which win over a file
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for i, s := range settings {
		if err := s.Value.Set(raw[i]); err != nil {
			problems = append(problems, fmt.Errorf("%s (-%s, %s): %w", s.What, s.Flag, s.Env, err))
			continue
		}
		if fsrc, ok := s.Value.(fileSource); ok && files[i] != "" && !given[s.Flag] {
			fsrc.setFile(files[i])
		}
	}
	return problems, nil
}

// Define is a Setting, for the settings tables of the services (one line each).
func Define(what, flag, env, usage string, value Field) Setting {
	return Setting{What: what, Flag: flag, Env: env, Usage: usage, Value: value}
}

// boolFlag is a bool setting's text as given on the command line, read into its Field after
// the environment like every other; its flag may stand alone, as flag.Bool's does.
type boolFlag struct{ p *string }

func (b boolFlag) String() string {
	if b.p == nil {
		return ""
	}
	return *b.p
}
func (b boolFlag) Set(v string) error { *b.p = v; return nil }
func (b boolFlag) IsBoolFlag() bool   { return true }

func isBool(f Field) bool {
	b, ok := f.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

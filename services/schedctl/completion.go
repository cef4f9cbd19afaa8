package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"flag"
)

// runCompletion prints a completion script for bash, zsh or fish. The commands, subcommands
// and flags come from the command table itself, so the script cannot drift from the program:
//
//	source <(schedctl completion bash)            # bash, or in ~/.bashrc
//	source <(schedctl completion zsh)             # zsh, or in ~/.zshrc
//	schedctl completion fish | source             # fish, or in ~/.config/fish/completions/schedctl.fish
func runCompletion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: schedctl completion bash|zsh|fish")
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	tree := completionTree()
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, bashCompletion(tree))
	case "zsh":
		fmt.Fprint(stdout, "autoload -U +X bashcompinit && bashcompinit\n"+bashCompletion(tree)+zshCompletion)
	case "fish":
		fmt.Fprint(stdout, fishCompletion(tree))
	case "-h", "--help":
		fmt.Fprintln(stdout, "usage: schedctl completion bash|zsh|fish")
	default:
		fmt.Fprintf(stderr, "schedctl completion: %q: the shells are bash, zsh and fish\n", args[0])
		return 2
	}
	return 0
}

// node is a command of the tree: its subcommands, or its flags, and what its first argument
// names ("job", "collection" or nothing), which the planners are asked for at a Tab.
type node struct {
	name  string
	subs  []node
	flags []string
	names string
}

// namesOf is what a subcommand's first argument names, read from its synopsis.
func namesOf(group string, sub subcommand) string {
	switch {
	case strings.HasPrefix(sub.args, "COLLECTION/JOB"):
		return "job"
	case strings.HasPrefix(sub.args, "[COLLECTION] [--"), group == "collection" && strings.HasPrefix(sub.args, "NAME") && sub.name != "create":
		return "collection"
	}
	return ""
}

// completionTree walks the command table. A subcommand's flags are those it defines: it is run
// with -h against a discarded output, which defines them and stops.
func completionTree() node {
	root := node{name: "schedctl", flags: []string{"--help", "--version"}}
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range append(names, "help") {
		n := node{name: name}
		for _, g := range groups {
			if g.name != name {
				continue
			}
			for _, sub := range g.subs {
				s := node{name: sub.name, names: namesOf(g.name, sub)}
				subcommandFlags(g.name, sub.name).VisitAll(func(f *flag.Flag) { s.flags = append(s.flags, dashed(f.Name)) })
				n.subs = append(n.subs, s)
			}
		}
		switch name {
		case "preview":
			fs := flag.NewFlagSet("preview", flag.ContinueOnError)
			fs.String("f", "", "")
			fs.String("now", "", "")
			fs.Int("n", 0, "")
			addJobFlags(fs)
			fs.VisitAll(func(f *flag.Flag) { n.flags = append(n.flags, dashed(f.Name)) })
		case "completion":
			n.subs = []node{{name: "bash"}, {name: "zsh"}, {name: "fish"}}
		}
		root.subs = append(root.subs, n)
	}
	return root
}

// dashed is a flag as written: -f, --every.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func words(ns []node) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.name)
	}
	return strings.Join(out, " ")
}

func bashCompletion(root node) string {
	var b strings.Builder
	b.WriteString(`# bash completion for schedctl: source <(schedctl completion bash)
_schedctl() {
	# Slices count from 0 in bash and in zsh (whose arrays otherwise start at 1).
	local cur="${COMP_WORDS[@]:$COMP_CWORD:1}" cmd="${COMP_WORDS[@]:1:1}" sub="${COMP_WORDS[@]:2:1}" opts="" names="" found=""
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "` + words(root.subs) + ` ` + strings.Join(root.flags, " ") + `" -- "$cur"))
		return
	fi
	case "$cmd" in
`)
	for _, c := range root.subs {
		if len(c.subs) == 0 && len(c.flags) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\t%s)\n", c.name)
		if len(c.subs) > 0 {
			fmt.Fprintf(&b, "\t\tif [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", words(c.subs))
			b.WriteString("\t\tcase \"$sub\" in\n")
			for _, s := range c.subs {
				switch {
				case s.names != "":
					fmt.Fprintf(&b, "\t\t%s) opts=%q names=%s ;;\n", s.name, strings.Join(s.flags, " "), s.names)
				case len(s.flags) > 0:
					fmt.Fprintf(&b, "\t\t%s) opts=%q ;;\n", s.name, strings.Join(s.flags, " "))
				}
			}
			b.WriteString("\t\tesac ;;\n")
		} else {
			fmt.Fprintf(&b, "\t\topts=%q ;;\n", strings.Join(c.flags, " "))
		}
	}
	b.WriteString(`	esac
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	elif [ -n "$names" ] && found="$("${COMP_WORDS[@]:0:1}" __complete "$names" "$cur" -- "${COMP_LINE:0:$((COMP_POINT - ${#cur}))}" 2>/dev/null)"; then
		# The names the planners know (NATS_URL, or the connection flags on the line), where the
		# line wants the subcommand's first argument; a collection ends in / to go on with its job.
		COMPREPLY=($(compgen -W "$found" -- "$cur"))
		if [[ ${#COMPREPLY[@]} -eq 1 && "${COMPREPLY[@]:0:1}" == */ ]] && type compopt >/dev/null 2>&1; then
			compopt -o nospace
		fi
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -F _schedctl schedctl
`)
	return b.String()
}

// zshCompletion runs the bash function in zsh (bashcompinit gives it compgen) and offers its
// answers itself: bashcompinit's own layer has no compopt, so a collection completed as
// "name/" got a space after it, and the job's name could not follow.
const zshCompletion = `_schedctl_zsh() {
	local -a COMP_WORDS COMPREPLY
	local COMP_CWORD=$((CURRENT - 1)) COMP_LINE="$BUFFER" COMP_POINT=$CURSOR m
	COMP_WORDS=("${words[@]}")
	_schedctl
	for m in "${COMPREPLY[@]}"; do
		if [[ $m == */ ]]; then compadd -S '' -- "$m"; else compadd -- "$m"; fi
	done
	(( ${#COMPREPLY} ))
}
compdef _schedctl_zsh schedctl
`

func fishCompletion(root node) string {
	var b strings.Builder
	b.WriteString("# fish completion for schedctl: schedctl completion fish | source\n")
	b.WriteString("complete -c schedctl -f\n")
	for _, c := range root.subs {
		fmt.Fprintf(&b, "complete -c schedctl -n __fish_use_subcommand -a %s\n", c.name)
		for _, s := range c.subs {
			fmt.Fprintf(&b, "complete -c schedctl -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a %s\n",
				c.name, words(c.subs), s.name)
			for _, f := range s.flags {
				fmt.Fprintf(&b, "complete -c schedctl -n '__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s' %s\n",
					c.name, s.name, fishFlag(f))
			}
			if s.names != "" {
				fmt.Fprintf(&b, "complete -c schedctl -n '__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s' -a '(schedctl __complete %s (commandline -ct) -- (commandline -opc) 2>/dev/null)'\n",
					c.name, s.name, s.names)
			}
		}
		for _, f := range c.flags {
			fmt.Fprintf(&b, "complete -c schedctl -n '__fish_seen_subcommand_from %s' %s\n", c.name, fishFlag(f))
		}
	}
	for _, f := range root.flags {
		fmt.Fprintf(&b, "complete -c schedctl -n __fish_use_subcommand %s\n", fishFlag(f))
	}
	return b.String()
}

// fishFlag is a flag as fish's complete takes it: -s f, -l every.
func fishFlag(f string) string {
	if name, ok := strings.CutPrefix(f, "--"); ok {
		return "-l " + name
	}
	return "-s " + strings.TrimPrefix(f, "-")
}

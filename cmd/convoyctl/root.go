package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kumodo/convoy-observer/internal/version"
)

// newRootCommand builds the command tree: convoyctl → health (eval, lint, coverage) and release
// (status, wait).
func newRootCommand(env *cliEnv) *cobra.Command {
	root := &cobra.Command{
		Use:           "convoyctl",
		Short:         "Evaluate health rules offline and read what convoy-observer found",
		RunE:          runGroup,
		SilenceErrors: true, // run prints errors and maps them to exit statuses
		SilenceUsage:  true,
		// --version prints "convoyctl VERSION (commit C, date D, GO PLATFORM)".
		Version: version.Get().String(),
		// Help and errors name the command as it was called (kubectl convoy as a plugin).
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: env.name},
	}
	root.SetVersionTemplate(env.name + " {{.Version}}\n")
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	env.conn = newConnection(root.PersistentFlags())
	// A connection flag's bad value is a usage error of any command, said at once.
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return env.conn.validate() }
	root.AddCommand(newHealthCommand(env))
	root.AddCommand(newReleaseCommand(env))
	return root
}

// newHealthCommand builds the health group.
func newHealthCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Work with health rule sets",
		RunE:  runGroup,
	}
	cmd.AddCommand(newHealthEvalCommand(env))
	cmd.AddCommand(newHealthLintCommand(env))
	cmd.AddCommand(newHealthCoverageCommand(env))
	cmd.AddCommand(newHealthTestCommand(env))
	return cmd
}

// runGroup runs a command that only groups subcommands: alone it prints its help; with
// an argument that names no subcommand it is a usage error. (Cobra would print the help
// and succeed for a group without a Run function, hiding a mistyped subcommand.)
func runGroup(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
	}
	return cmd.Help()
}

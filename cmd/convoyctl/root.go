package main

import (
	"github.com/spf13/cobra"
)

// newRootCommand builds the command tree: convoyctl → health → eval.
func newRootCommand(env *cliEnv) *cobra.Command {
	root := &cobra.Command{
		Use:           "convoyctl",
		Short:         "Command line of convoy-observer",
		Args:          cobra.NoArgs,
		SilenceErrors: true, // run prints errors and maps them to exit statuses
		SilenceUsage:  true,
	}
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newHealthCommand(env))
	return root
}

// newHealthCommand builds the health group.
func newHealthCommand(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Work with health rule sets",
		Args:  cobra.NoArgs, // an unknown subcommand is an error, not a help page
	}
	cmd.AddCommand(newHealthEvalCommand(env))
	return cmd
}

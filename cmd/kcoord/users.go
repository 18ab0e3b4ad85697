package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// envUserPassword is the password "kcoord users create" gives the user
// when no --password-file is given.
const envUserPassword = envPrefix + "USER_PASSWORD"

// newUsersCmd returns "kcoord users": SCRAM users managed over the Kafka
// protocol (DescribeUserScramCredentials and AlterUserScramCredentials,
// through kadm), as kafka-configs.sh --entity-type users does, so it works
// against kcoord and any Kafka cluster. Run it as a superuser.
func newUsersCmd() *cobra.Command {
	g := &adminCLI{}
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Create, list and delete SCRAM users",
		Long: `Manage the SCRAM users SASL logins are checked against, over the Kafka
protocol (AlterUserScramCredentials, DescribeUserScramCredentials), as
kafka-configs.sh --entity-type users does. A user's PLAIN logins are
checked against its SCRAM credential. Log in as a superuser:

  KCOORD_SASL_PASSWORD=... kcoord users list --tls-ca-file ca.pem \
    --sasl-mechanism SCRAM-SHA-512 --sasl-username admin`,
		Args: cobra.NoArgs,
	}
	g.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(g.userCreateCmd(), g.userListCmd(), g.userDeleteCmd())
	return cmd
}

// scramMechanisms maps the names the commands take to kadm's.
var scramMechanisms = map[string]kadm.ScramMechanism{
	"SCRAM-SHA-256": kadm.ScramSha256,
	"SCRAM-SHA-512": kadm.ScramSha512,
}

func parseMechanisms(names []string) ([]kadm.ScramMechanism, error) {
	var out []kadm.ScramMechanism
	for _, n := range names {
		m, ok := scramMechanisms[strings.ToUpper(strings.TrimSpace(n))]
		if !ok {
			return nil, fmt.Errorf("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", n)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

func (g *adminCLI) userCreateCmd() *cobra.Command {
	var mechanisms []string
	var iterations int32
	var passwordFile string
	cmd := &cobra.Command{
		Use:   "create USER",
		Short: "Create a user, or change its password",
		Long: `Create a SCRAM user, or replace its password, for each --mechanism. The
password is read from --password-file (its first line) or $` + envUserPassword + `;
it is salted here and only the salted keys reach the cluster.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mechs, err := parseMechanisms(mechanisms)
			if err != nil {
				return err
			}
			pass, err := secret(passwordFile, "--password-file", envUserPassword)
			if err != nil {
				return err
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			// One mechanism per request: Kafka refuses a user altered
			// twice in one.
			for _, m := range mechs {
				res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: args[0], Mechanism: m, Iterations: iterations, Password: pass}})
				if err == nil {
					err = userResult(res[args[0]])
				}
				if err != nil {
					return fmt.Errorf("user %s, %s: %w", args[0], m, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Set the %s credential of user %s.\n", m, args[0])
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&mechanisms, "mechanism", []string{"SCRAM-SHA-512", "SCRAM-SHA-256"}, "SCRAM mechanisms to create a credential for")
	cmd.Flags().Int32Var(&iterations, "iterations", 4096, "SCRAM iterations, 4096 to 16384")
	cmd.Flags().StringVar(&passwordFile, "password-file", "", "file holding the user's password (its first line)")
	return cmd
}

func (g *adminCLI) userListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list [USER...]",
		Short: "List users with their SCRAM mechanisms and iterations",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			described, err := adm.DescribeUserSCRAMs(ctx, args...)
			if err != nil {
				return err
			}
			users := make([]string, 0, len(described))
			for u := range described {
				users = append(users, u)
			}
			slices.Sort(users)
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
			var errs []error
			for _, u := range users {
				d := described[u]
				if d.Err != nil {
					errs = append(errs, fmt.Errorf("user %s: %w", u, userResult(kadm.AlteredUserSCRAM{Err: d.Err, ErrMessage: d.ErrMessage})))
					continue
				}
				for _, c := range d.CredInfos {
					fmt.Fprintf(w, "%s\t%s\t%d\n", u, c.Mechanism, c.Iterations)
				}
			}
			_ = w.Flush()
			return errors.Join(errs...)
		},
	}
}

func (g *adminCLI) userDeleteCmd() *cobra.Command {
	var mechanisms []string
	cmd := &cobra.Command{
		Use:   "delete USER",
		Short: "Delete a user's SCRAM credentials (every one by default)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			mechs, err := parseMechanisms(mechanisms)
			if err != nil {
				return err
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			if len(mechs) == 0 {
				described, err := adm.DescribeUserSCRAMs(ctx, user)
				if err != nil {
					return err
				}
				d := described[user]
				if d.Err != nil {
					return fmt.Errorf("user %s: %w", user, userResult(kadm.AlteredUserSCRAM{Err: d.Err, ErrMessage: d.ErrMessage}))
				}
				for _, c := range d.CredInfos {
					mechs = append(mechs, c.Mechanism)
				}
			}
			for _, m := range mechs {
				res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: m}}, nil)
				if err == nil {
					err = userResult(res[user])
				}
				if err != nil {
					return fmt.Errorf("user %s, %s: %w", user, m, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted the %s credential of user %s.\n", m, user)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&mechanisms, "mechanism", nil, "SCRAM mechanisms to delete (default: every one the user has)")
	return cmd
}

// userResult is one user's error with the broker's message.
func userResult(r kadm.AlteredUserSCRAM) error {
	if r.Err == nil {
		return nil
	}
	if r.ErrMessage != "" && !errors.Is(r.Err, kerr.ClusterAuthorizationFailed) {
		return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
	}
	return r.Err
}

package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newACLsCmd returns "kcoord acls": Kafka ACLs managed over the Kafka
// protocol (CreateAcls, DescribeAcls, DeleteAcls, through kadm) with
// kafka-acls.sh's flags, so it works against kcoord and any Kafka
// cluster. Run it as a superuser (or a principal with Cluster ALTER).
func newACLsCmd() *cobra.Command {
	g := &adminCLI{}
	cmd := &cobra.Command{
		Use:   "acls",
		Short: "Create, list and delete ACLs",
		Long: `Manage ACLs over the Kafka protocol, with kafka-acls.sh's flags. A node
that authenticates its clients (SASL or mutual TLS) lets a principal do
only what an ACL allows (superusers excepted):

  kcoord acls create --allow-principal User:alice --operation Read --group billing
  kcoord acls create --allow-principal User:alice --operation Read --topic orders --resource-pattern-type prefixed
  kcoord acls list --principal User:alice
  kcoord acls delete --allow-principal User:alice --operation Read --group billing`,
		Args: cobra.NoArgs,
	}
	g.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(g.aclCreateCmd(), g.aclListCmd(), g.aclDeleteCmd())
	return cmd
}

// aclFlags are kafka-acls.sh's selectors of principals, hosts, operations
// and resources.
type aclFlags struct {
	allow, deny           []string
	allowHosts, denyHosts []string
	principals            []string // list only: either permission
	operations            []string
	topics, groups        []string
	cluster               bool
	pattern               string
}

func (f *aclFlags) add(fs *pflag.FlagSet, list bool) {
	if list {
		fs.StringSliceVar(&f.principals, "principal", nil, "only ACLs of these principals (User:alice)")
	} else {
		fs.StringSliceVar(&f.allow, "allow-principal", nil, "principals allowed (User:alice, User:*)")
		fs.StringSliceVar(&f.deny, "deny-principal", nil, "principals denied")
		fs.StringSliceVar(&f.allowHosts, "allow-host", nil, "hosts (IP addresses) the allow ACLs apply from (default *)")
		fs.StringSliceVar(&f.denyHosts, "deny-host", nil, "hosts the deny ACLs apply from (default *)")
		fs.StringSliceVar(&f.operations, "operation", nil, "operations: Read, Write, Create, Delete, Alter, Describe, All, ... (delete: default All)")
	}
	fs.StringSliceVar(&f.topics, "topic", nil, "topic resources")
	fs.StringSliceVar(&f.groups, "group", nil, "group resources")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.StringVar(&f.pattern, "resource-pattern-type", "literal", "literal or prefixed (any or match when listing or deleting)")
}

// builder is the kadm ACL builder of the flags. forFilter (list, delete)
// leaves unset resources and principals matching every one; a delete
// that names principals takes kafka-acls.sh's defaults for the rest:
// host * and operation All, so it removes exactly what the same create
// line would have made.
func (f *aclFlags) builder(forFilter bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	pattern, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil {
		return nil, fmt.Errorf("--resource-pattern-type %q: %w", f.pattern, err)
	}
	b.ResourcePatternType(pattern)
	var ops []kadm.ACLOperation
	for _, o := range f.operations {
		op, err := kmsg.ParseACLOperation(strings.ToLower(o))
		if err != nil {
			return nil, fmt.Errorf("--operation %q: %w", o, err)
		}
		ops = append(ops, op)
	}
	resources := len(f.topics) + len(f.groups)
	if f.cluster {
		resources++
	}
	switch {
	case forFilter && resources == 0:
		b.AnyResource()
	case resources == 0:
		return nil, errors.New("name a resource: --topic, --group or --cluster")
	default:
		b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeClusters(f.cluster)
	}
	switch {
	case len(f.principals) > 0:
		b.Allow(f.principals...).Deny(f.principals...).AllowHosts().DenyHosts()
	case forFilter && len(f.allow) == 0 && len(f.deny) == 0:
		b.Allow().Deny().AllowHosts().DenyHosts()
	case len(f.allow) == 0 && len(f.deny) == 0:
		return nil, errors.New("name a principal: --allow-principal or --deny-principal")
	default:
		b.MaybeAllow(f.allow...).MaybeDeny(f.deny...)
		if len(f.allow) > 0 {
			b.MaybeAllowHosts(orWildcard(f.allowHosts)...)
		}
		if len(f.deny) > 0 {
			b.MaybeDenyHosts(orWildcard(f.denyHosts)...)
		}
		if len(ops) == 0 && forFilter {
			ops = []kadm.ACLOperation{kadm.OpAll}
		}
	}
	switch {
	case len(ops) > 0:
		b.Operations(ops...)
	case forFilter:
		b.Operations()
	default:
		return nil, errors.New("name an operation: --operation Read (or All)")
	}
	return b, nil
}

func (g *adminCLI) aclCreateCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs: every principal × operation × resource named",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := f.builder(false)
			if err != nil {
				return err
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			results, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return err
			}
			var errs []error
			for _, r := range results {
				if r.Err != nil {
					errs = append(errs, fmt.Errorf("%s %s %s on %s %s: %w", r.Permission, r.Principal, r.Operation, r.Type, r.Name, aclErr(r.Err, r.ErrMessage)))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Created %s %s %s from %s on %s %s (%s).\n", r.Permission, r.Principal, r.Operation, r.Host, r.Type, r.Name, r.Pattern)
			}
			return errors.Join(errs...)
		},
	}
	f.add(cmd.Flags(), false)
	return cmd
}

func (g *adminCLI) aclListCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List ACLs (every one, or those of the resources and principals named)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.pattern == "literal" && !cmd.Flags().Changed("resource-pattern-type") {
				f.pattern = "any"
			}
			b, err := f.builder(true)
			if err != nil {
				return err
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			results, err := adm.DescribeACLs(ctx, b)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "RESOURCE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
			seen := make(map[kadm.DescribedACL]bool)
			var errs []error
			for _, r := range results {
				if r.Err != nil {
					errs = append(errs, aclErr(r.Err, r.ErrMessage))
					continue
				}
				for _, d := range r.Described {
					if !seen[d] {
						seen[d] = true
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission)
					}
				}
			}
			_ = w.Flush()
			return errors.Join(errs...)
		},
	}
	f.add(cmd.Flags(), true)
	return cmd
}

func (g *adminCLI) aclDeleteCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete the ACLs matching the principals, operations and resources named",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.allow)+len(f.deny)+len(f.topics)+len(f.groups) == 0 && !f.cluster {
				return errors.New("name what to delete: a principal or a resource (kcoord acls list shows them)")
			}
			b, err := f.builder(true)
			if err != nil {
				return err
			}
			ctx, adm, done, err := g.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			results, err := adm.DeleteACLs(ctx, b)
			if err != nil {
				return err
			}
			var errs []error
			for _, r := range results {
				if r.Err != nil {
					errs = append(errs, aclErr(r.Err, r.ErrMessage))
					continue
				}
				for _, d := range r.Deleted {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted %s %s %s from %s on %s %s (%s).\n", d.Permission, d.Principal, d.Operation, d.Host, d.Type, d.Name, d.Pattern)
				}
			}
			return errors.Join(errs...)
		},
	}
	f.add(cmd.Flags(), false)
	return cmd
}

// aclErr is an ACL error with the broker's message.
func aclErr(err error, msg string) error {
	if msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// orWildcard is hosts, or "*" when none are named (kafka-acls.sh's
// default).
func orWildcard(hosts []string) []string {
	if len(hosts) == 0 {
		return []string{"*"}
	}
	return hosts
}

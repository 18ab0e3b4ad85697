package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

const defaultHTTPAddr = "127.0.0.1:9644"

func newHealthcheckCmd() *cobra.Command {
	var addr string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the node's /readyz says ready, 1 otherwise",
		Long: `Ask a node's /readyz whether it is ready: exit 0 on 200, 1 otherwise with a
one-line message. Meant for container health checks (images have no shell).
An unspecified host (0.0.0.0, [::] or none) means loopback.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if v := os.Getenv(envName("http-addr")); v != "" && !cmd.Flags().Changed("http-addr") {
				addr = v
			}
			msg, err := healthcheck(cmd.Context(), addr, timeout)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", defaultHTTPAddr, "the node's HTTP host:port [$"+envName("http-addr")+"]")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long")
	return cmd
}

// healthcheck GETs /readyz at addr and returns its answer when it is 200.
func healthcheck(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	url := readyzURL(addr)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("not ready: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	text := strings.Join(strings.Fields(string(body)), " ")
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("not ready: %s answered %s: %s", url, resp.Status, text)
	}
	return text, nil
}

// readyzURL is the /readyz URL of a node's --http-addr (see baseURL).
func readyzURL(addr string) string { return baseURL(addr) + "/readyz" }

// baseURL turns host:port (or a base URL) into the node's HTTP base URL,
// with no trailing slash, dialing loopback when the host is unspecified as
// in a listen address.
func baseURL(addr string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/")
	}
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	return "http://" + addr
}

package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// DefaultBaseURL is make run's address.
const DefaultBaseURL = "http://127.0.0.1:4000"

// credentials are what sluice login keeps: the gateway and the key, in a
// file only the user may read.
type credentials struct {
	BaseURL string `json:"base_url"`
	APIKey  string `json:"api_key"`
}

// credentialsPath is the file login writes: <user config dir>/sluice/credentials.json.
func credentialsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the user config dir: %w", err)
	}
	return filepath.Join(dir, "sluice", "credentials.json"), nil
}

// loadCredentials reads the saved credentials (empty when none), then lets
// SLUICE_BASE_URL and SLUICE_API_KEY override them.
func (a *app) loadCredentials() (credentials, error) {
	var c credentials
	path, err := credentialsPath()
	if err != nil {
		return c, err
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return c, fmt.Errorf("read %s: %w", path, err)
	default:
		if err := json.Unmarshal(b, &c); err != nil {
			return c, fmt.Errorf("%s is not a credentials file (run sluice login again): %w", path, err)
		}
	}
	if v := a.getenv("SLUICE_BASE_URL"); v != "" {
		c.BaseURL = v
	}
	if v := a.getenv("SLUICE_API_KEY"); v != "" {
		c.APIKey = v
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	return c, nil
}

// saveCredentials writes c with mode 0600 (its directory 0700), replacing
// the file whole so a reader never sees half of it.
func saveCredentials(c credentials) (string, error) {
	path, err := credentialsPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".credentials-*")
	if err != nil {
		return "", fmt.Errorf("write credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write credentials: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("write credentials: %w", err)
	}
	return path, nil
}

func (a *app) loginCmd() *cobra.Command {
	var base string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Save the gateway's address and your key (read from a prompt) for later commands",
		Long: "login asks for the API key (never an argument, so it stays out of shell history), checks it\n" +
			"against the gateway and keeps both, mode 0600, in the user config dir. SLUICE_BASE_URL and\n" +
			"SLUICE_API_KEY override what it saved.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if base == "" {
				base = DefaultBaseURL
			}
			fmt.Fprint(a.stderr, "API key: ")
			key, err := a.readSecret()
			fmt.Fprintln(a.stderr)
			if err != nil {
				return fmt.Errorf("read the key: %w", err)
			}
			if key == "" {
				return usageError{errors.New("no key given")}
			}
			c := newClient(base, key)
			if _, err := c.call(cmd.Context(), "GET", "/v1/models", nil); err != nil {
				return err
			}
			path, err := saveCredentials(credentials{BaseURL: base, APIKey: key})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Logged in to %s; the key is saved in %s (mode 0600).\n", base, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "base-url", "", "the gateway's URL (default "+DefaultBaseURL+")")
	return cmd
}

// readSecret reads one line from stdin without echo when it is a terminal.
func (a *app) readSecret() (string, error) {
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b, err := term.ReadPassword(int(f.Fd()))
		return strings.TrimSpace(string(b)), err
	}
	line, err := a.in().ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// in is stdin, buffered once for every prompt.
func (a *app) in() *bufio.Reader {
	if a.stdinBuf == nil {
		a.stdinBuf = bufio.NewReader(a.stdin)
	}
	return a.stdinBuf
}

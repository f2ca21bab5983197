package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuth for URL servers (issue 30, §4), where the Go SDK's client does it:
// the authorization code flow with a client registered beforehand. The
// client id and secret come from the environment (OAuthConfig names the
// variables), never from the configuration; the tokens live in memory
// only. The authorization step needs a person: the authorization URL is
// put to the person behind the call (ManagerOptions.Ask, the host's input
// handler when the connection is made at configure), who opens it and
// answers with the address the authorization server sent them back to.

// OAuthConfig is a URL server's oauth table.
type OAuthConfig struct {
	ClientIDEnv     string // the variable holding the client id
	ClientSecretEnv string // the variable holding its secret; "" for a public client
	RedirectURL     string // where the authorization server sends the person back
	// ClientCredentials: the client credentials grant (service to
	// service, no person; the SDK's extauth) in place of the
	// authorization code flow.
	ClientCredentials bool
}

// oauthSchema is the form the person answers: the address they were sent
// back to.
var oauthSchema = json.RawMessage(`{"type":"object","properties":{"redirected_to":{"type":"string","title":"The address you were sent back to"}},"required":["redirected_to"]}`)

// oauthHandler is a remote's OAuth handler, made at its first connection
// and kept across reconnections (its token with it).
func (r *remote) oauthHandler() (auth.OAuthHandler, error) {
	r.oauthOnce.Do(func() {
		o := r.cfg.OAuth
		id, ok := r.m.lookupEnv(o.ClientIDEnv)
		if !ok {
			r.oauthErr = fmt.Errorf("mcp server %q: oauth: %s is not set (it gives the client id)", r.cfg.Name, o.ClientIDEnv)
			return
		}
		creds := &oauthex.ClientCredentials{ClientID: id}
		if o.ClientSecretEnv != "" {
			secret, ok := r.m.lookupEnv(o.ClientSecretEnv)
			if !ok {
				r.oauthErr = fmt.Errorf("mcp server %q: oauth: %s is not set (it gives the client secret)", r.cfg.Name, o.ClientSecretEnv)
				return
			}
			creds.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: secret}
		}
		if o.ClientCredentials {
			r.oauth, r.oauthErr = extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
				Credentials: creds, HTTPClient: r.m.opts.HTTPClient})
			if r.oauthErr != nil {
				r.oauthErr = fmt.Errorf("mcp server %q: oauth: %v", r.cfg.Name, r.oauthErr)
			}
			return
		}
		r.oauth, r.oauthErr = auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
			PreregisteredClient:      creds,
			RedirectURL:              o.RedirectURL,
			AuthorizationCodeFetcher: r.authorizationCode,
			Client:                   r.m.opts.HTTPClient, // Clara's outbound path: its allowlist applies
		})
		if r.oauthErr != nil {
			r.oauthErr = fmt.Errorf("mcp server %q: oauth: %v", r.cfg.Name, r.oauthErr)
		}
	})
	return r.oauth, r.oauthErr
}

// authorizationCode asks the person to authorize Clara at the server's
// authorization server, and reads the code from where they were sent back.
func (r *remote) authorizationCode(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	if r.m.opts.Ask == nil {
		return nil, errors.New("nobody can be asked to authorize Clara (no input handler)")
	}
	msg := fmt.Sprintf("MCP server %q asks you to authorize Clara: open %s and give the address you are sent back to.", r.cfg.Name, args.URL)
	action, content, err := r.m.opts.Ask(ctx, "", msg, oauthSchema)
	if err != nil {
		return nil, err
	}
	if action != ActionAccept {
		return nil, fmt.Errorf("the authorization was %sd", action)
	}
	var answer struct {
		RedirectedTo string `json:"redirected_to"`
	}
	if err := json.Unmarshal(content, &answer); err != nil {
		return nil, fmt.Errorf("the authorization's answer: %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(answer.RedirectedTo))
	if err != nil {
		return nil, fmt.Errorf("the address given back: %v", err)
	}
	q := u.Query()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("the authorization server said %s", e)
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// oauthState is what a remote keeps of its OAuth handler.
type oauthState struct {
	oauthOnce sync.Once
	oauth     auth.OAuthHandler
	oauthErr  error
}

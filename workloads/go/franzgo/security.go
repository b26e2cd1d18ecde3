package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// exitNotAuthorized is the contract's status for a processor the cluster's authorizer refused.
const exitNotAuthorized = 8

// Security is the contract's security object (docs/client-contract.md): files only, so the
// configuration on the command line holds no secret.
type Security struct {
	Protocol     string `json:"protocol"`
	CA           string `json:"ca"`
	Certificate  string `json:"certificate"`
	Key          string `json:"key"`
	Keystore     string `json:"keystore"`
	Mechanism    string `json:"mechanism"`
	Username     string `json:"username"`
	PasswordFile string `json:"password_file"`
}

// securityOpts are franz-go's options for the object: TLS checked against the cluster's CA,
// with the client's certificate (SSL) or a SCRAM-SHA-512 login (SASL_SSL) whose password is
// read now, so a successor started after a rotation logs in with the new one.
func securityOpts(s *Security) ([]kgo.Opt, error) {
	if s == nil {
		return nil, nil
	}
	ca, err := os.ReadFile(s.CA)
	if err != nil {
		return nil, fmt.Errorf("security.ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("security.ca: no PEM certificate in it")
	}
	// franz-go names each broker it dials as the TLS server name, so host names are checked.
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	opts := []kgo.Opt{kgo.DialTLSConfig(cfg)}
	switch s.Protocol {
	case "SSL":
		pair, err := tls.LoadX509KeyPair(s.Certificate, s.Key)
		if err != nil {
			return nil, fmt.Errorf("security.certificate and key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case "SASL_SSL":
		if s.Mechanism != "SCRAM-SHA-512" {
			return nil, fmt.Errorf("security.mechanism %q: only SCRAM-SHA-512", s.Mechanism)
		}
		pw, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("security.password_file: %v", err)
		}
		auth := scram.Auth{User: s.Username, Pass: strings.TrimSpace(string(pw))}
		opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("security.protocol %q: SSL or SASL_SSL", s.Protocol)
	}
	return opts, nil
}

// refused is the exit for an error the cluster refused the client with, or nil: a missing
// ACL, or its login (a rotated password, found out at the next re-authentication).
func refused(info map[string]any) *exit {
	code, _ := info["code"].(string)
	if strings.HasSuffix(code, "_AUTHORIZATION_FAILED") || code == "SASL_AUTHENTICATION_FAILED" {
		return &exit{exitNotAuthorized, "not-authorized " + code}
	}
	return nil
}

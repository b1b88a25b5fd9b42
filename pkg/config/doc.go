// Package config holds a master's configuration: the node file (strict YAML)
// and its flags, where storage credentials come from (CredentialSource) and
// the loggers. The cluster-wide options the journal replicates are
// pkg/options, which reads no files.
package config

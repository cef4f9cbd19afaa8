// Package config holds what the services' configurations share: the kinds of setting
// (Text, Duration, Int, …) their settings tables are built from, and the masking of URL secrets
// before a configuration is logged.
package config

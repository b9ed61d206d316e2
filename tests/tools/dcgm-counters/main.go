// Reads a dcgm-exporter counters file as dcgm-exporter 4.x does, and prints each record.
//
// It follows NVIDIA/dcgm-exporter internal/pkg/counters/counter_config.go: ReadCSVFile makes
// an encoding/csv Reader with Comment '#' and nothing else changed (no TrimLeadingSpace, no
// LazyQuotes, FieldsPerRecord 0: every record as long as the first), then ExtractCounters
// trims the spaces around each field, refuses a record that is not exactly 3 fields, and
// refuses a Prometheus type outside promMetricType (internal/pkg/counters/const.go).
//
// Usage: go run main.go FILE; exit 1 with the reader's error, as dcgm-exporter would stop.
package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strings"
)

var promMetricType = map[string]bool{
	"gauge": true, "counter": true, "histogram": true, "summary": true, "label": true,
}

func main() {
	file, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer file.Close()
	r := csv.NewReader(file)
	r.Comment = '#'
	records, err := r.ReadAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i, record := range records {
		if len(record) == 0 {
			continue
		}
		for j, f := range record {
			record[j] = strings.Trim(f, " ")
		}
		if len(record) != 3 {
			fmt.Fprintf(os.Stderr, "malformed CSV record; err: failed to parse line %d (`%v`), expected 3 fields\n", i, record)
			os.Exit(1)
		}
		if !promMetricType[record[1]] {
			fmt.Fprintf(os.Stderr, "could not find Prometheus metric type '%s'\n", record[1])
			os.Exit(1)
		}
		fmt.Printf("%s\t%s\t%s\n", record[0], record[1], record[2])
	}
}

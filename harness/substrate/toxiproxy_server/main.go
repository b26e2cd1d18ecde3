// The harness's toxiproxy server: Shopify's toxiproxy with one extra toxic, kafka_hold,
// that understands Kafka's request framing (see kafka_hold.go). Everything else is the
// stock server: same API, same toxics, same flags the harness uses (-host, -port), and the
// stock -config (proxies created at start, what docker/compose.yaml uses).
package main

import (
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

func main() {
	host := flag.String("host", "localhost", "address the API listens on")
	port := flag.String("port", "8474", "port the API listens on")
	config := flag.String("config", "", "JSON file of proxies to create at start")
	flag.Parse()

	toxics.Register("kafka_hold", new(KafkaHoldToxic))

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	go func() {
		<-stop
		os.Exit(0)
	}()

	level := zerolog.InfoLevel
	if v, ok := os.LookupEnv("LOG_LEVEL"); ok {
		if parsed, err := zerolog.ParseLevel(v); err == nil {
			level = parsed
		}
	}
	logger := zerolog.New(os.Stdout).Level(level).With().Timestamp().Logger()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	if *config != "" {
		server.PopulateConfig(*config)
	}
	server.Listen(*host, *port)
}

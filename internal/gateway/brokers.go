package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/anyhook/anyhook/internal/broker"
	"github.com/anyhook/anyhook/internal/broker/kafkadest"
	"github.com/anyhook/anyhook/internal/broker/natsdest"
	"github.com/anyhook/anyhook/internal/broker/rabbitdest"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/delivery"
)

// dupWindowMargin is what a NATS stream's duplicate window must cover
// beyond a destination's lease: a claim's lease runs out, a rescuer (one
// poll later) makes it due, and the re-send goes out; a minute leaves room
// for a restart as well (docs/destinations.md).
const dupWindowMargin = time.Minute

// publisher gives the broker client of a destination of a broker type
// (nil for http); nothing is dialled yet.
func publisher(cfg *config.Config, d *config.Destination) (broker.Publisher, error) {
	k := "destinations." + d.Name
	switch {
	case d.Type == config.TypeNATS && d.NATS == nil, d.Type == config.TypeRabbitMQ && d.RabbitMQ == nil, d.Type == config.TypeKafka && d.Kafka == nil:
		// config.Validate names the missing block; Check runs on a config
		// with problems too, to list every one.
		return nil, nil
	}
	switch d.Type {
	case config.TypeNATS:
		return natsdest.New(natsdest.Options{URL: d.NATS.URL, Subject: d.NATS.Subject, Stream: d.NATS.Stream,
			MinWindow: d.Timeout.D() + cfg.Delivery.Grace.D() + dupWindowMargin, Name: "anyhook " + d.Name}), nil
	case config.TypeRabbitMQ:
		return rabbitdest.New(rabbitdest.Options{URL: d.RabbitMQ.URL, Exchange: d.RabbitMQ.Exchange, RoutingKey: d.RabbitMQ.RoutingKey}), nil
	case config.TypeKafka:
		p, err := kafkadest.New(kafkadest.Options{Brokers: d.Kafka.Brokers, Topic: d.Kafka.Topic, Timeout: d.Timeout.D()})
		if err != nil {
			return nil, cfg.Errorf(k+".kafka", "%v", err)
		}
		return p, nil
	}
	return nil, nil
}

// checkBrokers checks at start what each broker destination needs of its
// broker (a NATS stream with a long enough duplicate window): a broker
// that says no is a config error naming the key; one that does not answer
// is logged, and its deliveries fail (and retry) until it does.
func checkBrokers(ctx context.Context, cfg *config.Config, dests []delivery.Destination, log *slog.Logger) error {
	var errs []error
	for _, d := range dests {
		c, ok := d.Publisher.(interface{ Check(context.Context) error })
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Check(cctx)
		cancel()
		var se *natsdest.StreamError
		switch {
		case err == nil:
		case errors.As(err, &se):
			errs = append(errs, cfg.Errorf("destinations."+d.Name+".nats.stream", "%s", se.Msg))
		default:
			log.Warn("broker unreachable at start; its deliveries fail and are retried until it answers", "destination", d.Name, "err", err)
		}
	}
	return config.Join(errs...)
}

// closePublishers closes the broker clients of dests.
func closePublishers(dests []delivery.Destination) error {
	var errs []error
	for _, d := range dests {
		if d.Publisher != nil {
			errs = append(errs, d.Publisher.Close())
		}
	}
	return errors.Join(errs...)
}

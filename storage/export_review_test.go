package storage

// SetCurrencyExponent gives currency exp decimal places until the returned func is
// called: the table as a later release that changed it would read it.
func SetCurrencyExponent(currency string, exp int) (restore func()) {
	old, had := currencyExponents[currency]
	currencyExponents[currency] = exp
	return func() {
		if had {
			currencyExponents[currency] = old
		} else {
			delete(currencyExponents, currency)
		}
	}
}
